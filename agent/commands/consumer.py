"""The Kafka side of the command path: a consumer of ``myolo.commands`` for one node, and where acks go.

Each agent reads the commands topic in a consumer group of its own (``myolo-agent-commands-<node id>``), so
it is the only member and owns every partition; the executor skips other nodes' commands. Committed offsets
live with that group, so a restarted agent resumes where it stopped, and a new one starts from the earliest
retained command (the ledger, the epoch fence, ``expires_at`` and ``max_age_s`` make that replay harmless).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from myolo.agent.commands.executor import CommandExecutor
from myolo.events.bus import EventConsumer, EventProducer
from myolo.events.envelope import Event
from myolo.events.errors import SignatureError
from myolo.events.payloads import Payload
from myolo.events.settings import KafkaSettings
from myolo.events.signing import Verifier
from myolo.events.topics import COMMANDS

if TYPE_CHECKING:  # myolo.agent.publish imports myolo.agent.config, which mounts CommandsConfig from this package
    from myolo.agent.publish import Publisher


class AckingVerifier(Verifier):
    """The executor's verifier, plus a ``rejected`` ack for a command that fails it (for this node only).

    The consumer dead-letters such a record without calling the handler, so this hook is where the agent
    gets to tell the coordinator why the command was not obeyed."""

    def __init__(self, executor: CommandExecutor) -> None:
        super().__init__([])
        self._inner = executor.verifier
        self._executor = executor

    def verify(self, event: Event) -> None:
        try:
            self._inner.verify(event)
        except SignatureError as exc:
            self._executor.reject_unverified(event, exc)
            raise


def command_group_id(node_id: str) -> str:
    return f"myolo-agent-commands-{node_id}"


def build_command_consumer(
    settings: KafkaSettings,
    node_id: str,
    executor: CommandExecutor,
    *,
    dead_letters: EventProducer,
    topic: str = COMMANDS,
    group_id: str | None = None,
    auto_offset_reset: str = "earliest",
) -> EventConsumer:
    """The consumer to ``await .run()`` beside the daemon's loops; ``await .stop()`` ends it."""
    if executor.node_id != node_id:
        raise ValueError(f"node_id {node_id!r} differs from the executor's {executor.node_id!r}")
    return EventConsumer(
        settings,
        [topic],
        group_id or command_group_id(node_id),
        executor.handle,
        dead_letters=dead_letters,
        verifier=AckingVerifier(executor),
        clock=executor.clock,
        auto_offset_reset=auto_offset_reset,
        accept_key=lambda key, own=node_id.encode(): key == own,  # other nodes' commands are not ours to judge
    )


class SpooledAcks:
    """Send acks through the daemon's spooled publisher: durable across a Kafka outage, never blocking."""

    def __init__(self, publisher: Publisher) -> None:
        self._publisher = publisher

    async def send(self, payload: Payload) -> Event:
        return self._publisher.publish(payload, urgent=True)
