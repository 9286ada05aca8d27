"""A secured local broker: its users, their passwords, its TLS files, its listeners, and applying the ACLs.

Recorded in the stack state file (``security``), so every later command (``myoloctl events tail``, ``local
status``, a restart) finds how to connect and as whom. Passwords live in files of mode 0600 under
``<kafka dir>/security/users/``; a config names the file (``kafka.sasl_password_file``), never the password.

The broker then has two listeners on 127.0.0.1, neither of which lets anyone in unauthenticated:
- the client listener, SASL_SSL (or SASL_PLAINTEXT with ``tls=False``): SCRAM-SHA-512 for every user, and
  PLAIN for the ``producer`` role only, over TLS only: librdkafka before 2.6.1 (Debian 12's kcat) repeats the
  nonce in its SCRAM answer, which Kafka 4 rightly refuses, so external producers on such builds use PLAIN;
- the controller listener, SASL_PLAINTEXT with PLAIN for the admin alone (KRaft cannot use SCRAM there: the
  SCRAM credentials live in the metadata log the controller serves), on loopback.
``super.users`` is the admin only; everyone else gets exactly the grants of myolo.events.acls.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from myolo.coordinator.localstack.broker import admin, tls
from myolo.coordinator.localstack.broker.ports import HOST
from myolo.coordinator.localstack.broker.wire import AuthenticationError, Connection, Credentials
from myolo.events import acls
from myolo.events.acls import Role

ADMIN = "admin"
MECHANISM = "SCRAM-SHA-512"
PLAIN_ROLES: frozenset[str] = frozenset({"producer"})
Protocol = Literal["SASL_SSL", "SASL_PLAINTEXT"]


@dataclass
class UserRecord:
    role: Role
    password_file: str


@dataclass
class StackSecurity:
    """How the local broker is secured and who its users are (the ``security`` of the stack state file)."""

    protocol: Protocol = "SASL_SSL"
    folder: str = ""
    ca_file: str | None = None
    keystore: str | None = None
    mechanism: str = MECHANISM
    users: dict[str, UserRecord] = field(default_factory=dict)

    @property
    def tls(self) -> bool:
        return self.protocol == "SASL_SSL"

    def password(self, name: str) -> str:
        return Path(self.users[name].password_file).read_text().strip()

    def credentials(self, name: str = ADMIN) -> Credentials:
        """How the raw-protocol tools (probe, admin) connect as ``name``."""
        ca = Path(self.ca_file) if self.tls and self.ca_file else None
        return Credentials(name, self.password(name), self.mechanism, ca)

    def client_fields(self, name: str) -> dict[str, str]:
        """The ``[kafka]`` settings (myolo.events.settings.KafkaSettings) that connect as ``name``."""
        fields = {
            "security_protocol": self.protocol,
            "sasl_mechanism": self.mechanism,
            "sasl_username": name,
            "sasl_password_file": self.users[name].password_file,
        }
        if self.tls and self.ca_file:
            fields["ssl_ca_file"] = self.ca_file
        return fields

    def names(self, role: Role) -> list[str]:
        return sorted(name for name, user in self.users.items() if user.role == role)


def create(folder: Path, *, use_tls: bool = True) -> StackSecurity:
    """A new secured setup in ``folder``: the admin user and (with ``use_tls``) a CA and broker certificate."""
    sec = StackSecurity(protocol="SASL_SSL" if use_tls else "SASL_PLAINTEXT", folder=str(folder))
    if use_tls:
        files = tls.ensure_tls(folder / "tls")
        sec.ca_file, sec.keystore = str(files.ca), str(files.keystore)
    ensure_user(sec, ADMIN, "admin")
    return sec


def ensure_user(sec: StackSecurity, name: str, role: Role) -> UserRecord:
    """``name``'s record, with a random password in a file of mode 0600 made the first time. A name keeps its
    role: a node cannot become a coordinator by being asked for again under another role."""
    if role not in acls.ROLES:
        raise ValueError(f"unknown role {role!r}; one of {acls.ROLES}")
    record = sec.users.get(name)
    if record is not None:
        if record.role != role:
            raise ValueError(f"Kafka user {name!r} already exists with role {record.role!r}, not {role!r}")
        return record
    path = Path(sec.folder) / "users" / f"{name}.password"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(32) + "\n")  # [A-Za-z0-9_-]: safe in JAAS and --add-scram
    record = sec.users[name] = UserRecord(role, str(path))
    return record


def broker_properties(sec: StackSecurity, port: int, controller_port: int) -> dict[str, str]:
    """server.properties lines of a secured broker (override the plaintext defaults of ``config.py``)."""
    admin_pw = sec.password(ADMIN)
    client = sec.protocol
    props = {
        "listeners": f"CLIENT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"CLIENT://{HOST}:{port}",
        "listener.security.protocol.map": f"CLIENT:{client},CONTROLLER:SASL_PLAINTEXT",
        "inter.broker.listener.name": "CLIENT",
        "sasl.enabled.mechanisms": sec.mechanism,
        "sasl.mechanism.inter.broker.protocol": sec.mechanism,
        "listener.name.client.scram-sha-512.sasl.jaas.config": _jaas("scram.ScramLoginModule", ADMIN, admin_pw),
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": _jaas(
            "plain.PlainLoginModule", ADMIN, admin_pw, {ADMIN: admin_pw}
        ),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": acls.principal(ADMIN),
        "allow.everyone.if.no.acl.found": "false",
        "auto.create.topics.enable": "false",  # a topic exists because an admin or a coordinator made it
    }
    plain = {name: sec.password(name) for name, user in sec.users.items() if user.role in PLAIN_ROLES}
    if sec.tls:
        props |= {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(sec.keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(sec.ca_file),
        }
        if plain:
            props["listener.name.client.sasl.enabled.mechanisms"] = f"{sec.mechanism},PLAIN"
            props["listener.name.client.plain.sasl.jaas.config"] = _jaas("plain.PlainLoginModule", users=plain)
    return props


def _jaas(module: str, username: str = "", password: str = "", users: dict[str, str] | None = None) -> str:
    parts = [f"org.apache.kafka.common.security.{module} required"]
    if username:
        parts += [f'username="{username}"', f'password="{password}"']
    parts += [f'user_{name}="{pw}"' for name, pw in sorted((users or {}).items())]
    return " ".join(parts) + ";"


def format_arguments(sec: StackSecurity) -> list[str]:
    """StorageTool arguments that create the admin's SCRAM credential with the cluster (nothing else can log
    in before it exists); every other user is added over the admin connection (``apply``)."""
    return ["--add-scram", f"{sec.mechanism}=[name={ADMIN},password={sec.password(ADMIN)}]"]


def apply(sec: StackSecurity, port: int, timeout: float = 20.0) -> int:
    """Create the SCRAM credential of every user who cannot log in yet and every ACL of myolo.events.acls for
    their roles, as the admin, and wait until the broker enforces both (they travel through the metadata log
    first: a process started at once would be refused). Returns the number of ACLs. Idempotent: run on every
    ``up``; users who can log in keep their credential, so their open connections are left alone."""
    deadline = time.monotonic() + timeout
    names = sorted(name for name, user in sec.users.items() if user.role != "admin")
    wanted = {acl for name in sorted(sec.users) for acl in acls.acls_for(sec.users[name].role, name)}
    with Connection(HOST, port, sec.credentials(ADMIN), timeout) as conn:
        missing = [name for name in names if not _can_log_in(sec, name, port)]
        admin.upsert_scram_users(conn, [admin.User(name, sec.password(name)) for name in missing], sec.mechanism)
        admin.create_acls(conn, sorted(wanted, key=str))
        _until(lambda: wanted <= admin.describe_acls(conn), deadline, "the broker to enforce the new ACLs")
    _until(lambda: all(_can_log_in(sec, name, port) for name in missing), deadline, f"logins of {missing}")
    return len(wanted)


def _can_log_in(sec: StackSecurity, name: str, port: int) -> bool:
    try:
        Connection(HOST, port, sec.credentials(name), timeout=5.0).close()
    except AuthenticationError:
        return False
    return True


def _until(done: Callable[[], bool], deadline: float, what: str) -> None:
    while not done():
        if time.monotonic() > deadline:
            raise admin.AdminError(f"timed out waiting for {what}")
        time.sleep(0.05)  # polling the broker for a condition, not waiting for simulated time
