"""Set up who may use a broker: SCRAM users and ACLs, over one admin connection (``wire.py``).

Three requests aiokafka's admin client does not offer, encoded by hand: AlterUserScramCredentials (v0),
CreateAcls (v1) and DescribeAcls (v1). Both writes are idempotent: an upsert replaces a user's credential, and
the KRaft authorizer keeps one copy of an ACL however often it is created; so the local stack applies its whole
table at every ``up``.
"""

from __future__ import annotations

import secrets
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from myolo.coordinator.localstack.broker import scram
from myolo.coordinator.localstack.broker.wire import (
    Connection,
    ProbeError,
    compact_bytes,
    compact_string,
    string,
    uvarint,
)
from myolo.events.acls import Acl

API_CREATE_ACLS = 30
API_DESCRIBE_ACLS = 29
API_ALTER_SCRAM = 51
_RESOURCE = {"topic": 2, "group": 3, "cluster": 4}
_PATTERN = {"literal": 3, "prefixed": 4}
_OPERATION = {"read": 3, "write": 4, "create": 5, "describe": 8}
_ALLOW = 3
_ANY = 1
_MECHANISM = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


class AdminError(ProbeError):
    """The broker refused a change (the message names what and why)."""


@dataclass(frozen=True)
class User:
    name: str
    password: str


def upsert_scram_users(conn: Connection, users: Iterable[User], mechanism: str = "SCRAM-SHA-512") -> None:
    """Create or replace each user's SCRAM credential (a fresh salt each time)."""
    users = list(users)
    if not users:
        return
    body = uvarint(1)  # no deletions
    body += uvarint(len(users) + 1)
    for user in users:
        salt = secrets.token_bytes(32)
        salted = scram.salted_password(user.password, salt, scram.ITERATIONS, mechanism)
        body += compact_string(user.name) + struct.pack(">bi", _MECHANISM[mechanism], scram.ITERATIONS)
        body += compact_bytes(salt) + compact_bytes(salted) + b"\x00"
    body += b"\x00"
    reader = conn.request(API_ALTER_SCRAM, conn.version(API_ALTER_SCRAM, (0,)), body, flexible=True)
    reader.take(">i")  # throttle
    failed = []
    for _ in range(reader.uvarint() - 1):
        name, code, message = reader.compact_string(), reader.take(">h"), reader.compact_string()
        reader.skip_tags()
        if code:
            failed.append(f"{name}: {message or f'error code {code}'}")
    if failed:
        raise AdminError(f"the broker refused SCRAM users: {'; '.join(failed)}")


def create_acls(conn: Connection, acls: Iterable[Acl]) -> int:
    """Create every ACL (ALLOW, any host) in one request; returns how many were sent."""
    acls = list(acls)
    if not acls:
        return 0
    body = struct.pack(">i", len(acls))
    for acl in acls:
        body += struct.pack(">b", _RESOURCE[acl.resource]) + string(acl.name)
        body += struct.pack(">b", _PATTERN[acl.pattern]) + string(acl.principal) + string("*")
        body += struct.pack(">bb", _OPERATION[acl.operation], _ALLOW)
    reader = conn.request(API_CREATE_ACLS, conn.version(API_CREATE_ACLS, (1,)), body)
    reader.take(">i")  # throttle
    failed = []
    for acl in acls[: reader.take(">i")]:
        code, message = reader.take(">h"), reader.string()
        if code:
            failed.append(f"{acl}: {message or f'error code {code}'}")
    if failed:
        raise AdminError(f"the broker refused {len(failed)} ACL(s): {'; '.join(failed[:5])}")
    return len(acls)


def describe_acls(conn: Connection, principal: str | None = None) -> set[Acl]:
    """Every ALLOW ACL on topics, groups and the cluster (of ``principal`` when given)."""
    body = struct.pack(">b", _ANY) + string(None) + struct.pack(">b", _ANY) + string(principal) + string(None)
    body += struct.pack(">bb", _ANY, _ANY)
    reader = conn.request(API_DESCRIBE_ACLS, conn.version(API_DESCRIBE_ACLS, (1,)), body)
    reader.take(">i")  # throttle
    code, message = reader.take(">h"), reader.string()
    if code:
        raise AdminError(f"DescribeAcls failed: {message or f'error code {code}'}")
    resources = {v: k for k, v in _RESOURCE.items()}
    patterns = {v: k for k, v in _PATTERN.items()}
    operations = {v: k for k, v in _OPERATION.items()}
    found = set()
    for _ in range(reader.take(">i")):
        rtype, name, ptype = reader.take(">b"), reader.string() or "", reader.take(">b")
        for _ in range(reader.take(">i")):
            who, _host, op, permission = reader.string() or "", reader.string(), reader.take(">b"), reader.take(">b")
            if permission == _ALLOW and rtype in resources and ptype in patterns and op in operations:
                found.add(Acl(who, resources[rtype], name, patterns[ptype], operations[op]))  # type: ignore[arg-type]
    return found
