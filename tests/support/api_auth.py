"""Real API tokens for tests: a tokens file made the way ``myoloctl token create`` makes it, one token per role,
and an in-memory audit log (or one that fails, like Kafka away) for API tests that run without a broker."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

from myolo.common.clock import Clock, SimClock
from myolo.coordinator.api import tokens
from myolo.coordinator.api.audit import AuditLog
from myolo.coordinator.api.auth import Authenticator
from myolo.coordinator.api.gate import Security
from myolo.events.payloads import AuditRecord

# a person per role: a write's `by` is operator:<name>; prom is a Prometheus server's scrape token
SCRAPER, VIEWER, OPERATOR, ADMIN = "prom", "vic", "olive", "ada"
PEOPLE = {SCRAPER: "scrape", VIEWER: "viewer", OPERATOR: "operator", ADMIN: "admin"}


def write_tokens(path: Path, people: dict[str, str] | None = None) -> dict[str, str]:
    """A tokens file (0600) with a token per name -> role; returns name -> token."""
    return {name: tokens.add(path, name, role) for name, role in (people or PEOPLE).items()}


@cache
def shared() -> tuple[Path, dict[str, str]]:
    """One tokens file for the whole test process (name -> token), for helpers without a tmp_path."""
    path = Path(tempfile.mkdtemp(prefix="myolo-tokens-")) / "api-tokens"
    return path, write_tokens(path)


def token(name: str = OPERATOR) -> str:
    return shared()[1][name]


def bearer(name: str = OPERATOR) -> dict[str, str]:
    """The Authorization header of the shared token of ``name`` (prom: scrape, vic: viewer, olive: operator,
    ada: admin)."""
    return {"Authorization": f"Bearer {token(name)}"}


class MemoryAudit:
    """Where the API's audit records go in tests without Kafka; ``failing`` plays a broker that is away."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []
        self.failing = False

    async def send(self, record: AuditRecord) -> None:
        if self.failing:
            raise ConnectionError("Kafka is away (test)")
        self.records.append(record)


def security(audit: MemoryAudit | None = None, clock: Clock | None = None, instance_id: str = "coord-a") -> Security:
    """The API's gate over the shared tokens file, auditing into ``audit`` (a fresh MemoryAudit by default)."""
    sink = audit or MemoryAudit()
    log = AuditLog(sink.send, clock or SimClock(), instance_id, timeout_s=5.0)
    return Security(Authenticator(tokens.TokenStore(shared()[0])), log)
