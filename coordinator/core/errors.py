"""The coordinator's refusals, one family: what was refused, the field at fault and a hint saying what to do.

Components raise a kind of ``Refusal`` (``Invalid``, ``NotFound``, ``Conflict``...); the API turns the kind into
an HTTP status in one place (``coordinator/api/errors.py``) and ``myoloctl`` turns it into an exit code in one
place (``coordinator/cli/exits.py``). A component's own refusal subclasses the kind it is (``UnknownJob`` is a
``NotFound``), so the boundary needs no list of component errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")


class Refusal(Exception):
    """A request refused: ``error`` says what and why, ``field`` names what is at fault, ``hint`` what to do.
    ``status`` is an HTTP status the refusal's kind does not say: the one an answer came with (``myoloctl`` reads
    answers back into refusals), or one of no kind (a 405, a 500); None for a refusal raised inside."""

    def __init__(
        self, error: str, *, field: str | None = None, hint: str | None = None, status: int | None = None
    ) -> None:
        super().__init__(error)
        self.error, self.field, self.hint, self.status = error, field, hint, status

    def render(self) -> str:
        """One line naming the field, then the hint (what ``myoloctl`` prints)."""
        where = f" ({self.field})" if self.field else ""
        return f"{self.error}{where}" + (f"\nhint: {self.hint}" if self.hint else "")


def by_kind(refusal: Refusal, table: Mapping[type[Refusal], T]) -> T | None:
    """The entry of ``table`` for the first kind in the refusal's ancestry (None when it is of no kind there)."""
    for kind in type(refusal).__mro__:
        if kind in table:
            return table[kind]
    return None


class Invalid(Refusal, ValueError):
    """The request is wrong: a field's value, a body that is not JSON, an unknown field."""


class Unauthenticated(Refusal):
    """No credentials, or ones nobody issued (or revoked)."""


class Forbidden(Refusal):
    """The caller is known but may not do this (its role is too low)."""


class NotFound(Refusal, LookupError):
    """The request names something that does not exist (a node, a job, a model)."""


class Conflict(Refusal):
    """The request is fine but the current state refuses it (a rollout already runs, a bound is reached)."""


class TooLarge(Refusal):
    """The request is over a bound on its size."""


class Unsupported(Refusal):
    """The request comes in a form this route does not take (its content type)."""


class Unavailable(Refusal):
    """Nothing is wrong with the request; the coordinator cannot serve it now (retry, or see its log)."""


class NotLeader(Unavailable):
    """A write or a command reached a coordinator that does not (or no longer) lead. ``leader_url`` is where
    to send it (None while no leader is known, e.g. during an election: retry shortly)."""

    def __init__(self, leader_url: str | None = None, leader_id: str | None = None) -> None:
        self.leader_url = leader_url
        self.leader_id = leader_id
        where = f"the leader {leader_id} at {leader_url}" if leader_url else "no leader is known yet; retry shortly"
        super().__init__(f"this coordinator does not lead; send writes to {where}")


class UnknownNode(NotFound):
    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        super().__init__(f"node {node_id!r} is not known", field="id", hint="list the nodes with GET /v1/nodes")


class ComponentError(Exception):
    """Components failed on one event; the others already handled it. The consumer retries (then
    dead-letters) the event, and the core hands it again only to the components named here."""

    def __init__(self, failed: dict[str, BaseException]) -> None:
        self.failed = failed
        parts = ", ".join(f"{name}: {type(exc).__name__}: {exc}" for name, exc in failed.items())
        super().__init__(f"component(s) failed on the event: {parts}")
