"""``myoloctl token create|list|revoke``: the coordinators' API tokens, kept as hashes in ``api.tokens_file``.

``create`` prints the new token once, alone on stdout (``(umask 077; myoloctl token create ... >
~/.config/myolo/token)`` saves it for yourself); only its SHA-256 goes to the file. The coordinators read the
file again when it changes: a token works, or stops working after ``revoke``, from the next request on, without
a restart. Run it where the file is (each coordinator's host, or copy the file to them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from myolo.common.errors import ConfigError
from myolo.coordinator.api import tokens
from myolo.coordinator.cli.exits import err_console, fail

app = typer.Typer(help="API tokens: create (printed once), list, revoke. Roles: viewer, operator, admin.")

TokensFile = Annotated[
    Path,
    typer.Option(
        "--tokens-file",
        envvar="MYOLO_API_TOKENS_FILE",
        help="The coordinators' api.tokens_file (created 0600 if missing).",
    ),
]
DEFAULT = Path("/etc/myolo/api-tokens")


@app.command()
def create(
    name: Annotated[str, typer.Argument(help="Who the token is for, e.g. alice or ci-deploy (recorded as `by`).")],
    role: Annotated[
        str,
        typer.Option(
            "--role",
            help="scrape (GET /metrics only: for Prometheus), viewer (reads), operator (writes), admin (everything).",
        ),
    ],
    tokens_file: TokensFile = DEFAULT,
) -> None:
    """Make a token for NAME with ROLE: its hash is appended to the tokens file, the token printed once."""
    try:
        token = tokens.add(tokens_file, name, role)
    except (ValueError, ConfigError, OSError) as exc:
        fail(str(exc.reason if isinstance(exc, ConfigError) else exc))
    print(token)
    err_console.print(
        f"token for {name} ({role}) added to {tokens_file}; it is shown only now. "
        "Give it to its owner: MYOLO_TOKEN, or ~/.config/myolo/token (chmod 600).",
        markup=False,
    )


@app.command("list")
def list_tokens(tokens_file: TokensFile = DEFAULT) -> None:
    """The tokens' names, roles and creation times (the tokens themselves are not kept)."""
    try:
        entries = tokens.load(tokens_file)
    except ConfigError as exc:
        fail(exc.reason, code=1)
    out = Console(highlight=False, markup=False, soft_wrap=True)
    out.print(f"{'NAME':<24} {'ROLE':<9} {'CREATED':<21} SHA256")
    for e in entries:
        out.print(f"{e.name:<24} {e.role:<9} {e.created or '-':<21} {e.digest.hex()[:12]}")


@app.command()
def revoke(
    name: Annotated[str, typer.Argument(help="The token's name, as `myoloctl token list` shows it.")],
    tokens_file: TokensFile = DEFAULT,
) -> None:
    """Remove NAME's token: the coordinators refuse it from their next request on."""
    try:
        removed = tokens.revoke(tokens_file, name)
    except (ConfigError, OSError) as exc:
        fail(str(exc.reason if isinstance(exc, ConfigError) else exc), code=1)
    if not removed:
        fail(f"no token named {name!r} in {tokens_file} (`myoloctl token list --tokens-file {tokens_file}`)")
    Console(highlight=False, markup=False).print(f"token {name} revoked in {tokens_file}")
