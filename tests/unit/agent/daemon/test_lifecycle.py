"""``serve`` releases what it took once, in reverse order, however it ends: a failed start or a stop."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from myolo.agent.daemon.main import EXIT_OK, EXIT_START
from myolo.agent.gpu import GpuBackendError
from tests.unit.agent.daemon.test_commands import Node
from tests.unit.agent.daemon.test_main import play

pytestmark = pytest.mark.usefixtures("stop_nodes")  # a failed test leaves no daemon running


def record_releases(node: Node) -> list[str]:
    """Wrap each release of the node's runtime so the test sees which ran, and in what order."""
    rt, released = node.rt, []
    assert rt.commands is not None
    targets = {"backend": rt.backend, "commands": rt.commands, "spool": rt.publisher.spool, "notifier": rt.notifier}
    for name, owner in targets.items():
        close = owner.close
        if inspect.iscoroutinefunction(close):

            async def wrapped(close=close, name=name) -> None:
                released.append(name)
                await close()
        else:

            def wrapped(close=close, name=name) -> None:
                released.append(name)
                close()

        owner.close = wrapped
    return released


async def test_gpus_that_do_not_open_fail_the_start_and_release_the_ledger_spool_and_notifier(short_dir) -> None:
    node = Node(short_dir)
    released = record_releases(node)
    statuses: list[str] = []
    node.rt.notifier.status = lambda text: statuses.append(text) or True

    def no_driver() -> None:
        raise GpuBackendError("NVML: driver not loaded")

    node.rt.backend.open = no_driver
    await node.start()
    assert await node.stop() == EXIT_START
    assert released == ["commands", "spool", "notifier"]  # the GPUs were never opened: nothing to close
    assert statuses == ["failed: NVML: driver not loaded"]
    assert node.broker.producers == 0  # nothing was sent: the sender never started


async def test_a_server_that_cannot_listen_fails_the_start_after_the_gpus_opened(short_dir) -> None:
    node = Node(short_dir)
    Path(node.rt.cfg.control_socket).write_text("not a socket")
    released = record_releases(node)
    await node.start()
    assert await node.stop() == EXIT_START
    assert released == ["backend", "commands", "spool", "notifier"]
    assert Path(node.rt.cfg.control_socket).read_text() == "not a socket"  # not ours: left alone
    assert node.broker.producers == 0


async def test_a_stop_stops_the_consumer_first_and_flushes_the_spool_last(short_dir) -> None:
    node = Node(short_dir)
    released = record_releases(node)
    await node.start()
    source = node.sources[-1]
    stop_source = source.stop

    async def stop() -> None:
        released.append("consumer")
        await stop_source()

    source.stop = stop
    await play(node.clock, 3.0, 0.5)
    assert await node.stop() == EXIT_OK
    assert released == ["consumer", "backend", "commands", "spool", "notifier"]
    assert node.rt.publisher.spool.pending == 0 and len(node.broker.samples()) >= 3
