"""Arguments of each command action, checked before the agent takes the command, as the daemon's kwargs.

Why here: a command that cannot run must be *rejected* (nothing happened, the coordinator may fix and resend
under a new id), never accepted and then failed. The checks themselves are the contract's
(``myolo.events.payloads.commands.action_args``: the coordinator runs the same ones before it sends); this module
turns the checked Struct into the keyword arguments of the daemon's action callable:

- ``set_interval`` -> ``set_interval(interval_s=float)``
- ``report_sample`` -> ``report_sample()``
- ``nccl_probe`` -> ``nccl_probe(spec=ProbeSpec, timeout_s=float, command_id=str)``
- ``drain`` -> ``drain(draining=bool, reason=str | None)``
- ``start_workers`` -> ``start_workers(args=StartWorkersArgs)``
- ``stop_workers`` -> ``stop_workers(job_id=str, generation=int, checkpoint=bool)``
- ``upgrade`` -> ``upgrade(args=UpgradeArgs)``
- ``rollback`` -> ``rollback(args=RollbackArgs)``
- ``hash_files`` -> ``hash_files(paths=list[str], max_bytes=int)``
- ``check_tfrecords`` -> ``check_tfrecords(paths=list[str], max_bytes=int, max_files=int)``
- ``runtime_versions`` -> ``runtime_versions(timeout_s=float)``
- ``rdma_latency`` -> ``rdma_latency(args=RdmaLatencyArgs)``
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from myolo.agent.nccl.probe import ProbeSpec
from myolo.events.errors import InvalidEvent
from myolo.events.payloads import Command
from myolo.events.payloads.commands import (
    CheckTfrecordsArgs,
    DrainArgs,
    HashFilesArgs,
    NcclProbeArgs,
    ProfileArgs,
    RdmaLatencyArgs,
    RollbackArgs,
    RuntimeVersionsArgs,
    SetIntervalArgs,
    StartWorkersArgs,
    StopWorkersArgs,
    UpgradeArgs,
    action_args,
)

_PROBE = ProbeSpec()  # its defaults (a slots dataclass has no class-level default values)


class ArgsError(InvalidEvent):
    """A command argument that is missing or wrong. ``field`` is e.g. ``args.interval_s``."""


def _checked(cmd: Command) -> Any:
    try:
        return action_args(cmd.action, cmd.args)
    except InvalidEvent as exc:
        raise ArgsError(exc.reason, exc.field) from None


def set_interval_args(cmd: Command) -> dict[str, Any]:
    args: SetIntervalArgs = _checked(cmd)
    return {"interval_s": args.interval_s}


def report_sample_args(cmd: Command) -> dict[str, Any]:
    _checked(cmd)
    return {}


def nccl_probe_args(cmd: Command) -> dict[str, Any]:
    args: NcclProbeArgs = _checked(cmd)
    spec = ProbeSpec(
        world_size=args.world_size,
        backend=args.backend,
        sizes=tuple(args.sizes) if args.sizes is not None else _PROBE.sizes,
        warmup=args.warmup if args.warmup is not None else _PROBE.warmup,
        iters=args.iters if args.iters is not None else _PROBE.iters,
        dtype=args.dtype or _PROBE.dtype,
    )
    return {"spec": spec, "timeout_s": args.timeout_s, "command_id": cmd.command_id}


def drain_args(cmd: Command) -> dict[str, Any]:
    args: DrainArgs = _checked(cmd)
    return {"draining": args.draining, "reason": args.reason}


def start_workers_args(cmd: Command) -> dict[str, Any]:
    args: StartWorkersArgs = _checked(cmd)
    return {"args": args}


def stop_workers_args(cmd: Command) -> dict[str, Any]:
    args: StopWorkersArgs = _checked(cmd)
    return {"job_id": args.job_id, "generation": args.generation, "checkpoint": args.checkpoint}


def hash_files_args(cmd: Command) -> dict[str, Any]:
    args: HashFilesArgs = _checked(cmd)
    return {"paths": list(args.paths), "max_bytes": args.max_bytes}


def check_tfrecords_args(cmd: Command) -> dict[str, Any]:
    args: CheckTfrecordsArgs = _checked(cmd)
    return {"paths": list(args.paths), "max_bytes": args.max_bytes, "max_files": args.max_files}


def runtime_versions_args(cmd: Command) -> dict[str, Any]:
    args: RuntimeVersionsArgs = _checked(cmd)
    return {"timeout_s": args.timeout_s}


def rdma_latency_args(cmd: Command) -> dict[str, Any]:
    args: RdmaLatencyArgs = _checked(cmd)
    return {"args": args}


def upgrade_args(cmd: Command) -> dict[str, Any]:
    args: UpgradeArgs = _checked(cmd)
    return {"args": args}


def rollback_args(cmd: Command) -> dict[str, Any]:
    args: RollbackArgs = _checked(cmd)
    return {"args": args}


def profile_args(cmd: Command) -> dict[str, Any]:
    args: ProfileArgs = _checked(cmd)
    return {f: getattr(args, f) for f in args.__struct_fields__}


PARSERS: dict[str, Callable[[Command], dict[str, Any]]] = {
    "set_interval": set_interval_args,
    "report_sample": report_sample_args,
    "nccl_probe": nccl_probe_args,
    "drain": drain_args,
    "start_workers": start_workers_args,
    "stop_workers": stop_workers_args,
    "upgrade": upgrade_args,
    "rollback": rollback_args,
    "hash_files": hash_files_args,
    "check_tfrecords": check_tfrecords_args,
    "runtime_versions": runtime_versions_args,
    "rdma_latency": rdma_latency_args,
    "profile": profile_args,
}
