"""``POST /v1/jobs/{name}/profile`` on the leader: the rank's node gets a signed ``profile`` command for that
rank of the running generation; what the agent refuses, a rank out of range or a job not running are
refusals that say why."""

from __future__ import annotations

import msgspec
import pytest

from myolo.common.clock import SimClock
from myolo.coordinator.commands.interface import SentCommand
from myolo.coordinator.core.errors import Conflict, Invalid
from myolo.coordinator.fleet.model import NodeState
from myolo.coordinator.jobs.manifest import parse_manifest
from myolo.coordinator.jobs.profile import ProfileRequest, start_profile
from myolo.coordinator.jobs.records import Generation, JobRecord, JobSpec, JobStatus, Member
from myolo.events.payloads.commands import ProfileArgs
from tests.support.coordinator.jobs_sim import manifest


class Fleet:
    def node(self, node_id: str) -> NodeState | None:
        return NodeState(node_id=node_id, health_url=f"http://{node_id}:8080")


class Commands:
    """Records what is issued; the agent answers ``answer`` (with ``reason``)."""

    def __init__(self, answer: str = "accepted", reason: str | None = None) -> None:
        self.sent: list[tuple[str, ProfileArgs]] = []
        self.answer, self.reason = answer, reason

    async def issue(self, node_id: str, args: ProfileArgs) -> SentCommand:
        self.sent.append((node_id, args))
        return SentCommand(command_id="c1", node_id=node_id, action="profile", args=args)

    def intent(self, command_id: str) -> SentCommand | None:
        return SentCommand(
            command_id=command_id,
            node_id="x",
            action="profile",
            status=self.answer,
            reason=self.reason,
        )


def running_job(phase: str = "Running") -> JobRecord:
    spec = parse_manifest(manifest())
    gen = Generation(
        number=4,
        replicas=2,
        workers_per_node=2,
        members=[Member(node_id="n-a", node_rank=0, gpus=[0, 1]), Member(node_id="n-b", node_rank=1, gpus=[0, 1])],
        master_addr="n-a",
        master_port=29500,
        stage="running",
        created=0.0,
    )
    status = JobStatus(updated=0.0, phase=phase, generation=gen if phase == "Running" else None)
    return JobRecord(name=spec.name, created=0.0, spec=JobSpec(job=spec), status=status)


async def test_the_ranks_node_gets_the_profile_command_and_the_answer_says_where_to_fetch_it() -> None:
    commands = Commands()
    req = ProfileRequest(rank=3, duration_s=300, rate_hz=50, native=True)
    started = await start_profile(running_job(), req, Fleet(), commands, SimClock())
    ((node, args),) = commands.sent
    assert node == "n-b"  # rank 3 = node rank 1 x 2 workers + 1
    assert (args.rank, args.generation, args.duration_s, args.rate_hz, args.native) == (3, 4, 300, 50, True)
    assert msgspec.convert(msgspec.to_builtins(args), ProfileArgs) == args  # what the agent will accept
    assert (started.node_id, started.agent_url, started.profile_id) == ("n-b", "http://n-b:8080", args.profile_id)


async def test_refusals_say_why() -> None:
    with pytest.raises(Invalid, match=r"ranks 0\.\.3") as exc:
        await start_profile(running_job(), ProfileRequest(rank=4), Fleet(), Commands(), SimClock())
    assert exc.value.field == "rank"
    with pytest.raises(Conflict, match="no running generation"):
        await start_profile(running_job("Pending"), ProfileRequest(), Fleet(), Commands(), SimClock())
    refused = Commands("rejected", "bad arguments: py-spy is not installed on this node")
    with pytest.raises(Conflict, match="py-spy is not installed"):
        await start_profile(running_job(), ProfileRequest(), Fleet(), refused, SimClock())
