"""Coordinator commands wired into the daemon, on a simulated clock: the real ``serve`` with its executor, fed
by an in-memory command source instead of the Kafka consumer, publishing into an in-memory broker."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import ClassVar

import pytest

from myolo.agent.config import load_agent_config
from myolo.agent.control import StatusRequest
from myolo.agent.daemon import loops, status
from myolo.agent.daemon.actions import KafkaCommandSource
from myolo.agent.daemon.assemble import build_runtime
from myolo.agent.daemon.idle_probe import IdleProbe
from myolo.agent.daemon.main import handle_control, serve
from myolo.agent.gpu import SimBackend
from myolo.agent.notify import Notifier
from myolo.common.clock import SimClock
from myolo.common.errors import ConfigError
from myolo.events.envelope import Event, new_event
from myolo.events.payloads import BandwidthPoint, BandwidthReport, Command, CommandAck
from myolo.events.signing import sign
from tests.support.helpers import new_ed25519_key, refused_port, wait_until
from tests.unit.agent.commands.test_actions import FAKE_PROBE
from tests.unit.agent.daemon.test_main import FakeBroker, play, settle

pytestmark = pytest.mark.usefixtures("stop_nodes")

COORDINATOR = "/myolo/coordinator/test"


class MemorySource:
    """Stands in for the Kafka consumer: verifies each signed command and hands it to the executor."""

    made: list[MemorySource] = []

    def __init__(self, rt, executor) -> None:
        self.executor = executor
        self.queue: asyncio.Queue[Event] = asyncio.Queue()
        self.stopped = False
        MemorySource.made.append(self)

    async def run(self) -> None:
        while not self.stopped:
            event = await self.queue.get()
            if event is None:  # stop() woke us
                return
            self.executor.verifier.verify(event)
            await self.executor.handle(event)

    async def stop(self) -> None:
        self.stopped = True
        self.queue.put_nowait(None)  # type: ignore[arg-type]  # wakes run(); never handled

    def joined(self) -> bool:
        return not self.stopped


class Node:
    """A running daemon on a SimClock with commands enabled, and a coordinator that signs its commands."""

    started: ClassVar[list[Node]] = []  # what ``stop_left_running`` stops after a test that failed midway

    def __init__(self, d: Path, *, commands: bool = True, toml: str = "", interval_s: float = 1.0) -> None:
        key_file = d / "coordinator.key"
        self.key = new_ed25519_key(key_file)
        (d / "agent.toml").write_text(
            f"node_id = 'node-a'\nsimulate_gpus = 2\nsample_interval_s = {interval_s}\n"
            "[health]\nenabled = false\n[publish]\nready_timeout_s = 5\n" + toml
        )
        env = {"XDG_STATE_HOME": str(d)}
        if commands:  # as `myoloctl local up` passes them
            env |= {"MYOLO_COMMANDS_ENABLED": "true", "MYOLO_COMMANDS_KEY_FILES": f'["{key_file}.pub"]'}
        self.clock, self.broker = SimClock(), FakeBroker()
        cfg = load_agent_config(d / "agent.toml", env=env)
        self.backend = SimBackend(2, self.clock, node_tag="node-a")
        self.rt = build_runtime(
            cfg, self.clock, backend=self.backend, producer_factory=self.broker.factory(), notifier=Notifier(None)
        )
        self.sources: list[MemorySource] = []
        self.task: asyncio.Task | None = None
        self.epoch = 1

    async def start(self, **kw) -> None:
        def factory(rt, executor) -> MemorySource:
            src = MemorySource(rt, executor)
            self.sources.append(src)
            return src

        self.task = asyncio.create_task(serve(self.rt, install_signals=False, command_source=factory, **kw))
        Node.started.append(self)
        await settle()

    async def send(self, command_id: str, action: str, **args) -> None:
        cmd = Command(command_id=command_id, node_id="node-a", epoch=self.epoch, action=action, args=args)
        self.sources[-1].queue.put_nowait(sign(new_event(cmd, COORDINATOR, clock=self.clock), self.key))
        await settle(100)

    def acks(self, command_id: str) -> list[CommandAck]:
        return [
            e.data for _, e in self.broker.events if isinstance(e.data, CommandAck) and e.data.command_id == command_id
        ]

    async def stop(self) -> int:
        self.rt.stop_event.set()
        assert self.task is not None
        return await asyncio.wait_for(self.task, 10)

    @classmethod
    async def stop_left_running(cls, wall_s: float = 60.0) -> None:
        """Stop the daemons a failed test left running, playing their clocks (a daemon's stop waits on its
        simulated clock: left alone it never ends, and the event loop's teardown would wait on it forever)."""
        nodes, cls.started = cls.started, []
        for node in nodes:
            if node.task is None or node.task.done():
                continue
            node.rt.stop_event.set()
            for attempt in ("stop", "cancel"):
                if attempt == "cancel":
                    node.task.cancel()
                deadline = time.monotonic() + wall_s / 2
                while not node.task.done() and time.monotonic() < deadline:
                    await node.clock.advance(1.0, settle=50)
                    await asyncio.sleep(0.01)  # real time, for the worker processes being stopped
                if node.task.done():
                    break


async def count_ticks(node: Node, seconds: float, step: float) -> int:
    before = node.rt.sampler.ticks
    await play(node.clock, seconds, step)
    return node.rt.sampler.ticks - before


async def test_set_interval_changes_the_tick_spacing_at_once_and_is_acked_through_the_spool(short_dir) -> None:
    node = Node(short_dir)
    await node.start()
    await play(node.clock, 2.0, 0.5)
    assert await count_ticks(node, 10.0, 0.25) == 10  # 1 s interval

    await node.send("c1", "set_interval", interval_s=0.25)
    assert [a.status for a in node.acks("c1")] == ["accepted", "done"]
    assert node.acks("c1")[-1].result == {"interval_s": 0.25, "previous_s": 1.0}
    assert await count_ticks(node, 10.0, 0.125) == 40  # 0.25 s now
    assert node.rt.sampler.last_sample is not None and node.rt.sampler.last_sample.interval_s == 0.25

    await node.send("c2", "set_interval", interval_s=30.0)  # longer: the loop does not tick on the old cadence
    assert await count_ticks(node, 29.0, 0.5) == 0
    assert await count_ticks(node, 2.0, 0.5) == 1
    assert await count_ticks(node, 30.0, 0.5) == 1
    await play(node.clock, 5.0, 0.5)
    await node.send("c3", "set_interval", interval_s=1.0)  # shorter: applies now, not after the 30 s sleep
    assert await count_ticks(node, 1.0, 0.25) == 1
    assert await node.stop() == 0


async def test_report_sample_publishes_an_extra_sample_now_without_moving_the_regular_ticks(short_dir) -> None:
    node = Node(short_dir, interval_s=60.0)
    await node.start()
    await play(node.clock, 1.0, 0.5)
    assert [s.seq for s in node.broker.samples()] == [1]
    at = node.clock.monotonic()

    await node.send("r1", "report_sample")
    assert node.clock.monotonic() == at  # no simulated time passed: the sample came on request
    assert [s.seq for s in node.broker.samples()] == [1, 2]
    assert [a.status for a in node.acks("r1")] == ["accepted", "done"]
    assert node.acks("r1")[-1].result == {"seq": 2, "health": "ok", "gpus": 2}

    await node.send("r1", "report_sample")  # a retry of the same id: answered, not run again
    assert [a.status for a in node.acks("r1")] == ["accepted", "done", "duplicate"]
    assert node.acks("r1")[-1].result == {"seq": 2, "health": "ok", "gpus": 2}
    assert len(node.broker.samples()) == 2

    await play(node.clock, 58.5, 1.0)  # the regular tick is still due at 60 s, not 60 s after the extra one
    assert [s.seq for s in node.broker.samples()] == [1, 2]
    await play(node.clock, 1.0, 0.5)
    assert [s.seq for s in node.broker.samples()] == [1, 2, 3]
    assert await node.stop() == 0


async def test_drain_shows_in_health_status_line_and_control_status_until_lifted(short_dir) -> None:
    node = Node(short_dir)
    await node.start()
    await play(node.clock, 2.0, 0.5)
    check = status.current_report(node.rt).checks["commands"]
    assert check.status == "ok" and check.data["draining"] is False

    await node.send("d1", "drain", reason="auto:fault xid 79")
    assert node.acks("d1")[-1].status == "done" and node.acks("d1")[-1].result == {"draining": True, "stopped": []}
    rep = status.current_report(node.rt)
    assert rep.status == "warn"
    assert rep.checks["commands"].status == "warn"
    assert rep.checks["commands"].detail.startswith("draining (auto:fault xid 79)")
    assert "; draining; seq" in loops.status_line(node.rt)
    assert handle_control(node.rt, StatusRequest()).data["draining"] is True

    node.epoch = 2  # a newer leader lifts it after an uncordon
    await node.send("d2", "drain", draining=False)
    assert node.acks("d2")[-1].result == {"draining": False, "stopped": []}
    assert status.current_report(node.rt).status == "ok"
    assert "draining" not in loops.status_line(node.rt)

    node.epoch = 1  # the old leader's drain is fenced
    await node.send("d3", "drain")
    assert node.acks("d3")[-1].status == "rejected" and "stale epoch" in (node.acks("d3")[-1].reason or "")
    assert node.rt.draining is False

    node.epoch = 2
    await node.send("d4", "drain", draining="yes")
    assert node.acks("d4")[-1].status == "rejected" and "args.draining" in (node.acks("d4")[-1].reason or "")
    assert await node.stop() == 0
    assert node.sources[0].stopped  # stopped gracefully, not just cancelled


async def test_disabled_commands_start_no_consumer_and_show_no_commands_check(short_dir) -> None:
    node = Node(short_dir, commands=False)
    assert node.rt.commands is None
    await node.start()
    await play(node.clock, 3.0, 0.5)
    assert node.sources == []
    assert set(status.current_report(node.rt).checks) == {"nvml", "kafka", "spool", "gpus"}
    assert not (Path(node.rt.cfg.data_dir) / "commands").exists()
    assert await node.stop() == 0


def test_enabled_commands_without_a_key_fail_the_start_naming_the_key(short_dir) -> None:
    (short_dir / "agent.toml").write_text("node_id = 'n'\nsimulate_gpus = 1\n[commands]\nenabled = true\n")
    cfg = load_agent_config(short_dir / "agent.toml", env={"XDG_STATE_HOME": str(short_dir)})
    clock = SimClock()
    with pytest.raises(ConfigError, match=r"commands\.key_files: commands are enabled but no key file"):
        build_runtime(cfg, clock, backend=SimBackend(1, clock), producer_factory=FakeBroker().factory())
    with pytest.raises(ConfigError, match=r"probe\.world_size"):
        load_agent_config(None, env={"XDG_STATE_HOME": str(short_dir), "MYOLO_PROBE_WORLD_SIZE": "1"})


async def test_nccl_probe_command_publishes_the_bandwidth_report(short_dir) -> None:
    node = Node(short_dir, toml=f"[probe]\npython = {json.dumps([sys.executable, '-c', FAKE_PROBE])}\n")
    await node.start()
    await play(node.clock, 1.0, 0.5)
    await node.send("p1", "nccl_probe", world_size=2, sizes=[1_000_000], backend="gloo")
    assert node.rt.commands is not None
    await node.rt.commands.drain()
    await settle(100)
    assert [a.status for a in node.acks("p1")] == ["accepted", "done"], node.acks("p1")[-1].reason
    reports = [e.data for _, e in node.broker.events if isinstance(e.data, BandwidthReport)]
    assert [(r.command_id, r.world_size, [p.size_bytes for p in r.points]) for r in reports] == [("p1", 2, [1_000_000])]
    assert await node.stop() == 0


async def test_the_idle_probe_runs_only_on_an_idle_node_and_at_most_once_per_period(short_dir) -> None:
    toml = "[probe]\nidle_every_s = 600\nidle_samples = 5\nidle_util_pct = 5\n"
    toml += "[nccl]\npoll_interval_s = 60\n[spool]\nfsync_interval_s = 60\n"  # fewer wake-ups to simulate
    node = Node(short_dir, commands=False, toml=toml, interval_s=5.0)
    runs: list[tuple[float, int]] = []

    async def runner(spec, timeout_s) -> BandwidthReport:
        runs.append((node.clock.monotonic(), spec.world_size))
        point = BandwidthPoint(size_bytes=1024, time_s=0.001, algbw_gbps=1.0, busbw_gbps=1.0)
        return BandwidthReport(node_id="node-a", backend="gloo", world_size=spec.world_size, points=[point])

    node.backend.set_util(None, 90)
    await node.start(idle_probe=IdleProbe(node.rt, runner))
    await play(node.clock, 30.0, 1.0)
    assert runs == []  # busy: never

    node.backend.set_util(None, 0)
    await play(node.clock, 40.0, 1.0)
    assert len(runs) == 1 and runs[0][1] == 2  # world size: the GPU count
    first = runs[0][0]
    assert node.rt.sampler.last_sample is not None
    await play(node.clock, 500.0, 5.0)
    assert len(runs) == 1  # still idle, but not again within idle_every_s
    await play(node.clock, 150.0, 5.0)
    assert len(runs) == 2 and 600.0 <= runs[1][0] - first <= 605.0
    assert len([e for _, e in node.broker.events if isinstance(e.data, BandwidthReport)]) == 2

    node.rt.draining = True  # a drained node is not probed
    await play(node.clock, 700.0, 5.0)
    assert len(runs) == 2
    assert await node.stop() == 0


async def test_the_kafka_command_source_retries_on_the_agent_clock_while_kafka_is_away_and_stops_at_once(
    short_dir,
) -> None:
    with refused_port() as port:  # connections are refused at once, for the whole test
        node = Node(short_dir, toml=f"[kafka]\nbootstrap = '127.0.0.1:{port}'\n")
        assert node.rt.commands is not None
        source = KafkaCommandSource(node.rt, node.rt.commands)
        task = asyncio.create_task(source.run())

        async def until_failed(n: int) -> None:  # each attempt is real (refused) I/O; the back-off is simulated
            await wait_until(
                lambda: source.restarts >= n and node.clock.pending(),
                timeout=60,
                what=f"the source failing {n} time(s)",
            )

        await until_failed(1)
        await node.clock.advance(0.5)
        assert source.restarts == 1  # waiting out its 1 s back-off on the agent's clock
        await node.clock.advance(0.6)
        await until_failed(2)
        await source.stop()
        # wakes from the back-off sleep at once: the agent's clock does not move, so only stop() can end it
        await asyncio.wait_for(task, 30)
        await node.rt.commands.close()
