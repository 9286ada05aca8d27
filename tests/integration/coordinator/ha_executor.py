"""A process that plays the command side of an agent for the HA test, with helper I's real executor.

Until the agent daemon wires ``agent.commands`` in, this runs the real ``CommandExecutor`` (ledger, epoch
fence, once-only ids, acks) behind the real command consumer, and appends every action it actually
executes to ``--log`` as ``command_id action``, so the test can count executions.

    python -m tests.integration.coordinator.ha_executor --node N --key K --state-dir D --log L --bootstrap B
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import os
import signal
from pathlib import Path

from agent.commands import CommandExecutor, build_command_consumer
from events.bus import EventProducer
from events.keys import load_verify_key
from events.settings import KafkaSettings
from events.signing import Verifier

# the executor starts each action in a task created inside its handler, so the task inherits this
current_command: contextvars.ContextVar[str] = contextvars.ContextVar("current_command", default="?")


async def main(args: argparse.Namespace) -> None:
    settings = KafkaSettings(bootstrap=args.bootstrap, client_id="ha-executor")
    log = Path(args.log)

    def recorder(action: str):
        async def act(**kwargs) -> dict:
            with log.open("a") as f:
                f.write(f"{current_command.get()} {action}\n")
                f.flush()
                os.fsync(f.fileno())
            return {"executed_by": os.getpid()}

        return act

    async with EventProducer(settings, source=f"agent/{args.node}") as producer:
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
    asyncio.run(main(p.parse_args()))
