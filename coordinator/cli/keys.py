"""``myoloctl keys``: make the coordinators' signing key.

``generate PATH`` writes a new Ed25519 private key to PATH (mode 0600, from its creation on) and its public
half to PATH.pub. The coordinators' ``[signing] key_file`` is PATH (all of them share it: it signs commands and,
through a derived key, state records); each agent's ``[commands] key_files`` lists PATH.pub, which can verify
but not sign. An existing file is never overwritten: a rotation makes a new key beside the old one.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from myolo.common.errors import ConfigError
from myolo.common.keys import ensure_ed25519, public_path
from myolo.coordinator.cli.exits import fail

app = typer.Typer(help="Signing keys: `myoloctl keys generate PATH` makes the coordinators' Ed25519 key pair.")


@app.command()
def generate(
    path: Path = typer.Argument(
        ..., help="Where to write the private key (mode 0600); the public key goes to PATH.pub."
    ),
) -> None:
    """Write a new Ed25519 key pair: PATH (private, 0600) for the coordinators' [signing] key_file, PATH.pub for
    the agents' [commands] key_files. Refuses to overwrite an existing file."""
    public = public_path(path)
    for taken in (path, public):
        if taken.exists() or taken.is_symlink():
            fail(f"{taken} already exists; a key is never overwritten (choose another path for a new key)")
    try:
        signer = ensure_ed25519(path, "PATH")
    except (ConfigError, OSError) as exc:
        fail(f"cannot write {path}: {exc}")
    out = Console(highlight=False, markup=False)
    out.print(f"private key: {path} (mode 0600; the coordinators' [signing] key_file)")
    out.print(f"public key:  {public} (the agents' [commands] key_files)")
    out.print(f"key id:      {signer.key_id}")
