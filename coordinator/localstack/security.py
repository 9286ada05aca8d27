"""The local stack's security step: who each process is on Kafka, and what the stack needs before they start.

On a secured stack (``myoloctl local up --secure``) every coordinator and agent is its own Kafka user, with its
own password file (mode 0600) named in its config, and exactly the ACLs of its role (myolo.events.acls); the
stack also has an ``operator`` user (read only: what ``myoloctl events tail`` uses) and a ``producer`` user (an
external producer: drift samples and releases, e.g. from kcat). On a plain stack this step adds nothing.
The stack's other credentials: its API token (configs.py, myolo.coordinator.api.tokens.ensure_local) and its agents'
node keys (identity.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.core.coordinator import topic_specs
from myolo.coordinator.localstack.broker import security, state
from myolo.coordinator.localstack.broker.errors import BrokerError
from myolo.coordinator.localstack.broker.wire import ProbeError
from myolo.events.acls import Role
from myolo.events.settings import KafkaSettings
from myolo.events.topics import ensure_topics

STACK_USERS: dict[str, Role] = {"operator": "operator", "producer": "producer"}
MEMBER_ROLES: dict[str, Role] = {"coordinator": "coordinator", "agent": "agent"}


def member_kafka(state_dir: Path, stack: state.StackState, members: list[tuple[str, str]]) -> dict[str, dict]:
    """Each member's ``[kafka]`` security fields ({} on a plain stack): users made and ACLs applied first, so a
    process never starts with credentials the broker does not know yet. Saves ``stack`` (caller holds the lock)."""
    sec = stack.security
    if sec is None:
        return {name: {} for name, _ in members}
    for name, role in members:
        security.ensure_user(sec, name, MEMBER_ROLES[role])
    state.save(state_dir, stack)
    broker = stack.find("kafka")
    if broker is None:
        raise BrokerError("the local Kafka broker is not running", hint="run `myoloctl local up --secure`")
    try:
        security.apply(sec, broker.ports["client"])
    except ProbeError as exc:
        raise BrokerError(
            f"could not add the stack's Kafka users and ACLs: {exc}", hint="`myoloctl local status` shows the broker"
        ) from exc
    return {name: sec.client_fields(name) for name, _ in members}


def create_topics(stack: state.StackState) -> list[str]:
    """The topic catalogue, created as the admin: a secured broker creates no topic on first use, and agents
    may start publishing before a coordinator has made them."""
    if stack.security is None or not stack.bootstrap:
        return []
    settings = KafkaSettings(bootstrap=stack.bootstrap, client_id="myoloctl", **stack.security.client_fields("admin"))
    return asyncio.run(ensure_topics(settings.client_kwargs(), topic_specs(COMPONENTS)))


def client_settings(stack: state.StackState | None, user: str, client_id: str = "myoloctl") -> KafkaSettings | None:
    """Settings that connect to the local stack as ``user`` (``operator`` or ``admin``); None on a plain stack."""
    if stack is None or stack.security is None or not stack.bootstrap:
        return None
    return KafkaSettings(bootstrap=stack.bootstrap, client_id=client_id, **stack.security.client_fields(user))
