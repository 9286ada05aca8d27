"""A process that plays the command side of an agent for the HA test, with helper I's real executor.

Until the agent daemon wires ``myolo.agent.commands`` in, this runs the real ``CommandExecutor`` (ledger, epoch
fence, once-only ids, acks) behind the real command consumer, and appends every action it actually
executes to ``--log`` as ``command_id action``, so the test can count executions.

    python -m tests.support.coordinator.ha_executor --node N --key K --state-dir D --log L --bootstrap B
        [--node-key NODE_KEY]
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import os
import signal
from pathlib import Path

from myolo.agent.commands import CommandExecutor, build_command_consumer
from myolo.common.keys import ensure_ed25519, load_verify_key
from myolo.events.bus import EventProducer
from myolo.events.settings import KafkaSettings
from myolo.events.signing import Verifier
from myolo.events.sources import agent_source

# the executor starts each action in a task created inside its handler, so the task inherits this
current_command: contextvars.ContextVar[str] = contextvars.ContextVar("current_command", default="?")


async def main(args: argparse.Namespace) -> None:
    settings = KafkaSettings(bootstrap=args.bootstrap, client_id="ha-executor")
    log = Path(args.log)

    def recorder(action: str):
        async def act(_args: object) -> dict:
            with log.open("a") as f:
                f.write(f"{current_command.get()} {action}\n")
                f.flush()
                os.fsync(f.fileno())
            return {"executed_by": os.getpid()}

        return act

    # acks come from the node's agent, signed with the node's key, as the agent's own are
    node_key = ensure_ed25519(Path(args.node_key or Path(args.state_dir) / "node.key"), "--node-key")
    async with EventProducer(settings, source=agent_source(args.node), signer=node_key) as producer:
        executor = CommandExecutor(
            args.node,
            args.state_dir,
            Verifier([load_verify_key(args.key, "--key")]),
            producer,
            {a: recorder(a) for a in ("report_sample", "set_interval")},
        )
        handle = executor.handle

        async def tagged(event, info=None) -> None:
            current_command.set(getattr(event.data, "command_id", "?"))
            await handle(event, info)

        executor.handle = tagged  # type: ignore[method-assign]
        consumer = build_command_consumer(settings, args.node, executor, dead_letters=producer)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        task = asyncio.create_task(consumer.run())
        await consumer.ready.wait()
        Path(args.state_dir, "ready").touch()
        await stop.wait()
        await consumer.stop()
        await task
        await executor.drain()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    for name in ("--node", "--key", "--state-dir", "--log", "--bootstrap"):
        p.add_argument(name, required=True)
    p.add_argument("--node-key", help="the node's key (the agent's node.key); default <state-dir>/node.key")
    asyncio.run(main(p.parse_args()))
