"""``myoloctl``'s one way to fail: a command raises ``CliError`` (or lets a ``Refusal`` through) and ``main.py``
prints it on stderr and exits with its code, here and nowhere else.

The kind of a refusal decides its code, whether the coordinator answered it (read back from its HTTP status) or
the command found it before asking: a request that is the caller's to fix exits 2, a command that could not be
carried out exits 1, as does a check or a gate that failed (``preflight``, ``local status``, a version the
watermark is not found in).
"""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.text import Text

from myolo.coordinator.core.errors import (
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    Refusal,
    TooLarge,
    Unauthenticated,
    Unavailable,
    Unsupported,
    by_kind,
)

OK = 0
FAILED = 1  # a check or a gate failed, or the command could not be carried out
REFUSED = 2  # the request is the caller's to fix
CODES = (OK, FAILED, REFUSED)

EXIT_CODE: dict[type[Refusal], int] = {
    Invalid: REFUSED,
    NotFound: REFUSED,
    Conflict: REFUSED,
    TooLarge: REFUSED,
    Unsupported: REFUSED,
    Unauthenticated: FAILED,
    Forbidden: FAILED,
    Unavailable: FAILED,
}

HELP = (
    "Exit codes, the same in every command: 0 done; "
    "1 a check or a gate failed, or the command could not be carried out (no coordinator answered, the token "
    "is missing or refused, its role is too low, the coordinator failed); "
    "2 the request is yours to fix (a bad option, argument or field, a name nothing has, a conflict with the "
    "current state, a body too large or of the wrong type)."
)

err_console = Console(stderr=True, soft_wrap=True, highlight=False)


class CliError(Exception):
    """A command that cannot go on: one line for stderr (printed as written) and the exit code of ``CODES``."""

    def __init__(self, message: str, exit_code: int = REFUSED) -> None:
        if exit_code not in CODES[1:]:
            raise ValueError(f"exit code {exit_code} is not one of myoloctl's failure codes {CODES[1:]}")
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def fail(message: str, code: int = REFUSED) -> NoReturn:
    """Stop the command: ``message`` on stderr and exit ``code`` (2: the caller's to fix, 1: not carried out)."""
    raise CliError(message, code)


def exit_code(refusal: Refusal) -> int:
    """The code of the first kind in the refusal's ancestry (1 for a refusal of no kind, e.g. a 500)."""
    code = by_kind(refusal, EXIT_CODE)
    return FAILED if code is None else code


def exit_for(exc: CliError | Refusal) -> typer.Exit:
    """Print the failure (its field and hint for a refusal; brackets print as written) and say how to exit."""
    if isinstance(exc, Refusal):
        message, code = exc.render(), exit_code(exc)
    else:
        message, code = exc.message, exc.exit_code
    err_console.print(Text.assemble(("error:", "bold red"), " ", message))
    return typer.Exit(code)
