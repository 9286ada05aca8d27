"""AgentLink against a fake agent made of real ZeroMQ sockets (PULL for progress, PUSH for control)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import zmq

from myolo.events.payloads import TrainingProgress
from myolo.kernels.worker import AgentLink, ControlRequest, WorkerEnv
from myolo.kernels.worker.protocol import ControlMessage, WorkerHeartbeat

RECV_TIMEOUT_MS = 60_000  # a deadline against a hang, not a measurement: local IPC delivers in microseconds


class FakeAgent:
    """The agent's half: binds PULL (progress/heartbeats) and PUSH (control), as the real agent will."""

    def __init__(self, ctx: zmq.Context, tmp: Path) -> None:
        self.progress_endpoint = f"ipc://{tmp}/progress.sock"
        self.control_endpoint = f"ipc://{tmp}/control.sock"
        self.pull = ctx.socket(zmq.PULL)
        self.pull.setsockopt(zmq.RCVTIMEO, RECV_TIMEOUT_MS)
        self.pull.setsockopt(zmq.LINGER, 0)
        self.pull.bind(self.progress_endpoint)
        self.push = ctx.socket(zmq.PUSH)
        self.push.setsockopt(zmq.LINGER, 0)
        self.push.bind(self.control_endpoint)

    def recv(self) -> tuple[bytes, bytes]:
        topic, body = self.pull.recv_multipart()
        return topic, body

    def send_control(self, kind: str, job_id: str = "job-1", generation: int = 2) -> None:
        self.push.send(msgspec.json.encode(ControlMessage(kind=kind, job_id=job_id, generation=generation)))

    def close(self) -> None:
        self.pull.close()
        self.push.close()


@pytest.fixture
def ctx() -> Iterator[zmq.Context]:
    c = zmq.Context()
    yield c
    c.term()


@pytest.fixture
def agent(ctx: zmq.Context, tmp_path: Path) -> Iterator[FakeAgent]:
    a = FakeAgent(ctx, tmp_path)
    yield a
    a.close()


def make_env(agent: FakeAgent | None, rank: int = 0) -> WorkerEnv:
    return WorkerEnv(
        rank=rank,
        world_size=1 if rank == 0 else rank + 1,
        local_rank=rank,
        local_world_size=rank + 1,
        master_addr="127.0.0.1",
        master_port=29500,
        job_id="job-1",
        generation=2,
        progress_endpoint=agent.progress_endpoint if agent else None,
        control_endpoint=agent.control_endpoint if agent else None,
    )


def record(step: int) -> TrainingProgress:
    return TrainingProgress(
        job_id="job-1",
        generation=2,
        rank=0,
        world_size=1,
        step=step,
        loss=2.5,
        tokens_per_s=1234.0,
        step_time_s=0.25,
        grad_norm=0.75,
        gradient_staleness=0,
        backends={"rms_norm": "torch"},
    )


def test_progress_record_reaches_agent_as_training_progress(agent: FakeAgent, ctx: zmq.Context) -> None:
    with AgentLink(make_env(agent), context=ctx) as link:
        assert link.progress(record(3))
        topic, body = agent.recv()
    assert topic == b"progress"
    assert msgspec.json.decode(body, type=TrainingProgress) == record(3)


def test_heartbeats_are_rate_limited_and_identify_the_rank(agent: FakeAgent, ctx: zmq.Context) -> None:
    clock = [100.0]
    link = AgentLink(make_env(agent), context=ctx, heartbeat_interval_s=1.0, monotonic=lambda: clock[0])
    try:
        assert link.heartbeat(1)
        clock[0] += 0.5
        assert not link.heartbeat(2)  # within the interval: not sent
        assert link.heartbeat(2, force=True)
        clock[0] += 1.0
        assert link.heartbeat(3)
        beats = [msgspec.json.decode(agent.recv()[1], type=WorkerHeartbeat) for _ in range(3)]
    finally:
        link.close()
    assert [b.step for b in beats] == [1, 2, 3]
    assert {(b.job_id, b.generation, b.rank) for b in beats} == {("job-1", 2, 0)}


def test_progress_can_be_switched_off_per_rank_but_heartbeats_still_go(agent: FakeAgent, ctx: zmq.Context) -> None:
    with AgentLink(make_env(agent, rank=1), context=ctx, send_progress=False) as link:
        assert not link.progress(record(1))
        assert link.heartbeat(1)
        topic, body = agent.recv()
    assert topic == b"heartbeat"
    assert msgspec.json.decode(body, type=WorkerHeartbeat).rank == 1


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        (["checkpoint"], ControlRequest(checkpoint=True)),
        (["stop"], ControlRequest(stop=True)),
        (["checkpoint", "stop"], ControlRequest(checkpoint=True, stop=True)),
    ],
)
def test_control_messages_become_requests(
    agent: FakeAgent, ctx: zmq.Context, kinds: list[str], expected: ControlRequest
) -> None:
    with AgentLink(make_env(agent), context=ctx) as link:
        assert link.poll_control() is None
        for kind in kinds:
            agent.send_control(kind)
        got = link.poll_control(timeout_ms=RECV_TIMEOUT_MS)
        # The second message may trail the first by a moment; read it too before comparing.
        if got != expected:
            extra = link.poll_control(timeout_ms=RECV_TIMEOUT_MS)
            got = ControlRequest(
                checkpoint=bool(got and got.checkpoint) or bool(extra and extra.checkpoint),
                stop=bool(got and got.stop) or bool(extra and extra.stop),
            )
        assert got == expected
        assert got.kind == ("stop" if expected.stop else "checkpoint")
        assert link.poll_control() is None  # consumed once


def test_foreign_generation_and_garbage_are_ignored_not_fatal(agent: FakeAgent, ctx: zmq.Context) -> None:
    with AgentLink(make_env(agent), context=ctx) as link:
        agent.send_control("stop", generation=1)  # a message meant for the previous generation
        agent.push.send(b"{not json")
        agent.push.send(b'{"kind": "explode", "job_id": "job-1", "generation": 2}')
        agent.send_control("checkpoint")  # the real one, last
        got = None
        while got is None:
            got = link.poll_control(timeout_ms=RECV_TIMEOUT_MS)
        assert got == ControlRequest(checkpoint=True)
        assert len(link.ignored_control) == 3
        assert "generation 1 ignored" in link.ignored_control[0]
        assert "not JSON" in link.ignored_control[1]
        assert "malformed" in link.ignored_control[2]


def test_standalone_link_is_a_no_op() -> None:
    link = AgentLink(make_env(None))
    assert not link.progress(record(1))
    assert not link.heartbeat(1, force=True)
    assert link.poll_control() is None
    link.close()


def test_full_queue_drops_instead_of_blocking(ctx: zmq.Context, tmp_path: Path) -> None:
    # No agent is listening: records queue up to the high-water mark, then are dropped and counted.
    env = make_env(None)
    env = WorkerEnv(**{**env.__dict__, "progress_endpoint": f"ipc://{tmp_path}/nobody.sock"})
    with AgentLink(env, context=ctx, send_hwm=2, linger_ms=0) as link:
        sent = [link.progress(record(s)) for s in range(50)]
    assert not all(sent)
    assert link.dropped == sent.count(False) > 0


def test_rank_other_than_zero_does_not_consume_control(agent: FakeAgent, ctx: zmq.Context) -> None:
    # Only rank 0 connects to the control socket, so a request is never split between ranks (PUSH would
    # round-robin); outside torch.distributed another rank has nothing to agree with and sees no request.
    with AgentLink(make_env(agent), context=ctx) as rank0, AgentLink(make_env(agent, rank=1), context=ctx) as other:
        assert other._pull is None
        agent.send_control("stop")
        assert other.poll_control(timeout_ms=50) is None
        assert rank0.poll_control(timeout_ms=RECV_TIMEOUT_MS) == ControlRequest(stop=True)
