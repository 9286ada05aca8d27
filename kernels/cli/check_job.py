"""``python -m myolo.kernels.cli.check_job``: the trainer's verdict on a job, before any worker of it starts.

The node agent never imports torch or ``kernels``, yet a bad job (an unknown model, a layout that does not
divide the world size) must be refused before it starts anything, with the field to fix. So the agent runs
this in the trainer's interpreter: one JSON request on stdin, one JSON verdict line on stdout. Nothing here
imports torch (a test keeps it so): the check costs an interpreter start, not a torch import.
"""

from __future__ import annotations

import argparse
import sys
from typing import Annotated

import msgspec

from myolo.events.limits import cut
from myolo.events.payloads.trainer_job import JobCheckResult, TrainerJob, decode
from myolo.kernels.train.config import JobConfig, JobConfigError

MAX_INPUT_BYTES = 1 << 20
MAX_FIELD_BYTES = 200

HELP = """\
Judge a trainer job the way the workers would, without starting them (and without importing torch).

stdin:  one JSON object, at most 1 MiB:
          {"job": {<TrainerJob sections; absent fields take the trainer's defaults>}, "world_size": N}
        world_size is the number of workers the job would get (nodes x workers per node).
stdout: one JSON line:
          {"ok": true}
          {"ok": false, "field": "job.<section>.<field>", "reason": "<what is wrong and what to change>"}
        "field" names the job field to change (for a combination, the one the reason puts first);
        it is "job" when no single field is at fault.
exit:   0 with a verdict (whether ok or not); 2 when the input is unreadable (too large, not JSON,
        not that object, world_size missing or out of 1..2**20), with the reason on stderr.
"""


class CheckRequest(msgspec.Struct, forbid_unknown_fields=True):
    """What the agent sends: the job as it travels (each field checked against ``TrainerJob`` here, so
    a bad field gets a verdict naming it rather than an unreadable-input error) and the world size."""

    job: dict[str, msgspec.Raw]
    world_size: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)]


class UnreadableInput(Exception):
    """The request itself is wrong (not the job in it): the caller's bug, answered with exit code 2."""


def read_request(raw: bytes) -> CheckRequest:
    if len(raw) > MAX_INPUT_BYTES:
        raise UnreadableInput(f"stdin holds more than {MAX_INPUT_BYTES} bytes; a job request is far smaller")
    try:
        return msgspec.json.decode(raw, type=CheckRequest)
    except msgspec.DecodeError as exc:  # ValidationError included
        raise UnreadableInput(f"stdin is not a job request: {exc}") from None
    except RecursionError:
        raise UnreadableInput("stdin nests deeper than the decoder allows; a job request is two levels deep") from None


def job_config(request: CheckRequest) -> JobConfig:
    """The ``JobConfig`` the workers would build (``nproc`` = the world size); JobConfigError names a field.
    Decoded as the wire's ``TrainerJob`` first, so a trainer-only field (``nproc``) is unknown here."""
    sections = {name: msgspec.json.decode(raw) for name, raw in request.job.items()}
    job = decode(sections, TrainerJob)
    return JobConfig(**msgspec.structs.asdict(job), nproc=request.world_size)


def judge(request: CheckRequest) -> JobCheckResult:
    """Reasons and fields are cut to a bound: they may quote the request (an unknown option's name)."""
    try:
        job = job_config(request)
    except JobConfigError as exc:  # about a key of the request's job, whatever its name
        return refuse(f"job.{exc.field}" if exc.field else "job", str(exc))
    try:
        job.validate()
    except JobConfigError as exc:
        return refuse(wire_field(exc.field), str(exc))
    except Exception as exc:  # the trainer's arithmetic on an extreme value: still a verdict, never a traceback
        return refuse("job", f"the trainer cannot use this job: {type(exc).__name__}: {exc}")
    return JobCheckResult(ok=True)


def refuse(field: str, reason: str) -> JobCheckResult:
    return JobCheckResult(ok=False, field=cut(field, MAX_FIELD_BYTES), reason=cut(reason))


def wire_field(field: str | None) -> str:
    """A ``JobConfig`` field as the request names it (its ``nproc`` is the request's world size)."""
    if field is None:
        return "job"
    return "world_size" if field == "nproc" else f"job.{field}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m myolo.kernels.cli.check_job",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.parse_args(argv)
    try:
        request = read_request(sys.stdin.buffer.read(MAX_INPUT_BYTES + 1))
    except UnreadableInput as exc:
        print(f"check_job: error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.buffer.write(msgspec.json.encode(judge(request)) + b"\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
