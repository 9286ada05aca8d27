"""Who may do what on the bus: the ACLs of each role, in one declarative table.

The broker enforces these (KRaft ``StandardAuthorizer``, ``allow.everyone.if.no.acl.found=false``): a
principal with no ACL may do nothing, so every right below is a grant and there are no denies. The local
stack applies them (coordinator/localstack/broker/admin.py); docs/security-kafka.md renders the same table as
``kafka-acls.sh`` commands for a production cluster (``kafka_acls_commands``). Roles:

- ``agent``: one principal per node (``User:node-1``). Writes its telemetry, faults, reports, training
  progress, command acks and dead letters; reads ``myolo.commands`` in its own consumer group only. Kafka
  cannot restrict a principal by record key, so one node could still publish *about* another: node events
  that cause action are signed by the node (events/signing.py). Per-node principals give each node
  its own credentials to revoke and its own name in the broker's audit log, and pin each node's group.
- ``coordinator``: one principal per instance. Reads every ``myolo.*`` topic; writes commands, dead letters,
  the API's audit records, the model life cycle (``myolo.models``), rollouts' phases (``myolo.rollouts``) and every ``myolo.state.*`` topic; its own ingest group and the shared leader group; may create ``myolo.*``
  topics (``myolo-coordinator run`` creates the catalogue on a fresh cluster).
- ``producer``: services outside the fleet (serving, release pipelines). Writes only drift samples and
  releases; reads nothing.
- ``operator``: people's tools (``myoloctl events tail``, dashboards). Reads every ``myolo.*`` topic and
  uses groups named ``myolo-ops-*``; writes nothing.
- ``admin``: a super user in the broker's config (``super.users``), used to set up users, ACLs and topics,
  never by a daemon.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from myolo.events import topics as t

Role = Literal["agent", "coordinator", "producer", "operator", "admin"]
ROLES: tuple[Role, ...] = ("agent", "coordinator", "producer", "operator", "admin")
Resource = Literal["topic", "group", "cluster"]
Pattern = Literal["literal", "prefixed"]
Operation = Literal["read", "write", "create", "describe"]

TOPIC_PREFIX = "myolo."
STATE_PREFIX = "myolo.state."
OPS_GROUP_PREFIX = "myolo-ops-"
LEADER_GROUP = "myolo-coordinator-leader"  # myolo.coordinator.config LeaderConfig.group_id's default
AGENT_WRITES = (t.NODE_SAMPLES, t.NODE_FAULTS, t.NODE_REPORTS, t.TRAINING_PROGRESS, t.COMMAND_ACKS, t.DEAD_LETTER)
COORDINATOR_WRITES = (t.COMMANDS, t.DEAD_LETTER, t.AUDIT, t.MODELS, t.ROLLOUTS)  # and every myolo.state.* topic
PRODUCER_WRITES = (t.DRIFT_SAMPLES, t.RELEASES)


def agent_group(node: str) -> str:
    """The consumer group an agent reads its commands in (myolo.agent.commands.command_group_id)."""
    return f"myolo-agent-commands-{node}"


def coordinator_group(instance: str) -> str:
    """The ingest group of one coordinator (myolo.coordinator.core.coordinator)."""
    return f"myolo-coordinator-{instance}"


@dataclass(frozen=True)
class Acl:
    """One ALLOW rule for one principal from any host."""

    principal: str  # "User:node-1"
    resource: Resource
    name: str  # topic or group name or prefix; "kafka-cluster" for the cluster
    pattern: Pattern
    operation: Operation


def principal(username: str) -> str:
    return f"User:{username}"


def acls_for(role: Role, username: str) -> tuple[Acl, ...]:
    """Every grant of ``username`` in ``role`` (none for the admin, a super user)."""
    who = principal(username)

    def topic(name: str, op: Operation, pattern: Pattern = "literal") -> Acl:
        return Acl(who, "topic", name, pattern, op)

    def group(name: str, pattern: Pattern = "literal") -> Acl:
        return Acl(who, "group", name, pattern, "read")

    if role == "agent":
        return (
            *(topic(name, "write") for name in AGENT_WRITES),
            topic(t.COMMANDS, "read"),
            group(agent_group(username)),
        )
    if role == "coordinator":
        return (
            topic(TOPIC_PREFIX, "read", "prefixed"),
            topic(TOPIC_PREFIX, "create", "prefixed"),
            *(topic(name, "write") for name in COORDINATOR_WRITES),
            topic(STATE_PREFIX, "write", "prefixed"),
            group(coordinator_group(username)),
            group(LEADER_GROUP),
        )
    if role == "producer":
        return tuple(topic(name, "write") for name in PRODUCER_WRITES)
    if role == "operator":
        return (topic(TOPIC_PREFIX, "read", "prefixed"), group(OPS_GROUP_PREFIX, "prefixed"))
    if role == "admin":
        return ()
    raise ValueError(f"unknown role {role!r}; one of {ROLES}")


def allows(acls: tuple[Acl, ...], resource: Resource, name: str, operation: Operation) -> bool:
    """Whether ``acls`` grant ``operation`` on the named resource (READ and WRITE imply DESCRIBE, as in Kafka)."""
    implied = {"describe": {"describe", "read", "write"}}.get(operation, {operation})
    for acl in acls:
        if acl.resource != resource or acl.operation not in implied:
            continue
        if acl.name == name or (acl.pattern == "prefixed" and name.startswith(acl.name)):
            return True
    return False


def kafka_acls_commands(role: Role, username: str, bootstrap: str = "BROKER:9093") -> list[str]:
    """The same grants as ``kafka-acls.sh`` command lines, for a cluster this code does not set up."""
    lines = []
    for acl in acls_for(role, username):
        target = {"topic": "--topic", "group": "--group", "cluster": "--cluster"}[acl.resource]
        pattern = " --resource-pattern-type prefixed" if acl.pattern == "prefixed" else ""
        lines.append(
            f"kafka-acls.sh --bootstrap-server {bootstrap} --command-config admin.properties --add "
            f"--allow-principal {acl.principal} --operation {acl.operation.capitalize()} {target} {acl.name}{pattern}"
        )
    return lines
