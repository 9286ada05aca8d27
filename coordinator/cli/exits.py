"""``myoloctl``'s exit codes: the one place a refusal becomes one, so a failure exits alike in every command.

The kind of the refusal decides, whether the coordinator answered it (read back from its HTTP status) or the
command found it before asking: a request that is the caller's to fix exits 2, a command that could not be
carried out exits 1, as does a check or a gate that failed (``preflight``, ``local status``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from rich.markup import escape

from myolo.coordinator.cli.client import ApiClient
from myolo.coordinator.cli.common import fail
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


def exit_code(refusal: Refusal) -> int:
    """The code of the first kind in the refusal's ancestry (1 for a refusal of no kind, e.g. a 500)."""
    code = by_kind(refusal, EXIT_CODE)
    return FAILED if code is None else code


def refused(refusal: Refusal, where: str = "") -> NoReturn:
    """Print the refusal (its field and hint; brackets in it print as written) and exit with its code."""
    fail(escape(f"{where}{refusal.render()}"), exit_code(refusal))


@contextmanager
def refusals(where: str = "") -> Iterator[None]:
    """Any refusal raised inside exits as ``refused`` says."""
    try:
        yield
    except Refusal as exc:
        refused(exc, where)


def connect(api: str | None) -> ApiClient:
    """The client of ``--api`` (or the local stack); a refusal exits with its kind's code ."""
    try:
        return ApiClient.from_option(api)
    except Refusal as exc:
        refused(exc)


def answer(client: ApiClient, call: Callable[[ApiClient], dict[str, Any]]) -> dict[str, Any]:
    """The answer to one request; a refusal exits with its kind's code ."""
    try:
        return call(client)
    except Refusal as exc:
        refused(exc)


def ask(api: str | None, call: Callable[[ApiClient], dict[str, Any]]) -> tuple[ApiClient, dict[str, Any]]:
    """``connect`` then ``answer``: the one call path of a command that asks the coordinators once."""
    client = connect(api)
    return client, answer(client, call)
