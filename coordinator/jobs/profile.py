"""``POST /v1/jobs/{name}/profile``: profile one rank of a job's running generation. The leader finds the node
that runs the rank, sends its agent a signed ``profile`` command and waits for the agent to take it (or say
why not); the stacks stay on the node, where ``myoloctl profile`` fetches them as it fetches logs.
"""

from __future__ import annotations

import uuid
from typing import Annotated

import msgspec

from myolo.common.clock import Clock
from myolo.coordinator.commands.interface import CommandSender
from myolo.coordinator.core.errors import Conflict, Invalid, Unavailable
from myolo.coordinator.fleet.interface import FleetNodes
from myolo.coordinator.jobs.records import JobRecord
from myolo.events.payloads.commands import MAX_PROFILE_S, ProfileArgs

TAKEN_WITHIN_S = 15.0  # an agent acks a command within a second or two; past this, say so


class ProfileRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    rank: Annotated[int, msgspec.Meta(ge=0)] = 0
    duration_s: Annotated[float, msgspec.Meta(gt=0, le=MAX_PROFILE_S)] = 30.0
    rate_hz: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 100
    native: bool = False


class ProfileStarted(msgspec.Struct, kw_only=True):
    """Where the profile is taken and where to fetch it: ``GET {agent_url}/v1/profiles/{profile_id}``."""

    profile_id: str
    job: str
    rank: int
    generation: int
    node_id: str
    agent_url: str | None
    duration_s: float
    command_id: str


async def start_profile(
    rec: JobRecord, req: ProfileRequest, fleet: FleetNodes, commands: CommandSender, clock: Clock
) -> ProfileStarted:
    gen = rec.status.generation
    if gen is None or rec.status.phase not in ("Running", "Resizing"):
        raise Conflict(
            f"job {rec.name} has no running generation ({rec.status.phase}: {rec.status.reason or 'not placed'})",
            field="name",
            hint="profile a job while it trains; `myoloctl get jobs` shows its phase",
        )
    if req.rank >= gen.world_size:
        raise Invalid(f"generation {gen.number} of job {rec.name} has ranks 0..{gen.world_size - 1}", field="rank")
    member = next((m for m in gen.members if m.node_rank == req.rank // gen.workers_per_node), None)
    if member is None:
        raise Conflict(f"generation {gen.number} lists no node for rank {req.rank}; retry", field="rank")
    node = fleet.node(member.node_id)
    args = ProfileArgs(
        profile_id=uuid.uuid4().hex[:16],
        job_id=rec.name,
        rank=req.rank,
        generation=gen.number,
        duration_s=req.duration_s,
        rate_hz=req.rate_hz,
        native=req.native,
    )
    intent = await commands.issue(member.node_id, args)
    deadline = clock.monotonic() + TAKEN_WITHIN_S
    while True:
        now = commands.intent(intent.command_id) or intent
        if now.status in ("accepted", "done"):
            break
        if now.terminal:
            raise Conflict(
                f"the agent of {member.node_id} did not take the profile: {now.reason or now.status}",
                field="rank",
                hint="the reason says what to fix; send it again after",
            )
        if clock.monotonic() > deadline:
            raise Unavailable(
                f"the agent of {member.node_id} has not answered the profile command in {TAKEN_WITHIN_S:g} s",
                hint=f"it may still run: GET /v1/commands shows command {intent.command_id}",
            )
        await clock.sleep(0.1)
    return ProfileStarted(
        profile_id=args.profile_id,
        job=rec.name,
        rank=req.rank,
        generation=gen.number,
        node_id=member.node_id,
        agent_url=node.health_url if node is not None else None,
        duration_s=req.duration_s,
        command_id=intent.command_id,
    )
