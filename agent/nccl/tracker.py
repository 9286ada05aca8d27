"""Follow the NCCL lines of a log and say what matters: a communicator came up, NCCL warned, a collective hung.

One tracker reads one log (a file or stream), which may carry several processes and devices: torchrun's
combined output interleaves every local rank. State is therefore kept per process (version, network, NICs)
and per communicator being built (keyed by pid and CUDA device, because NCCL prints a communicator's
rings, trees and transports from the thread that initialises it, between the ``comm .. nRanks ..`` line and
``Init COMPLETE``). Lines that match nothing are ignored; nothing a trainer prints can make it raise.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from myolo.agent.nccl.parse import (
    AlgoSet,
    ChannelCounts,
    CommInfo,
    InitComplete,
    InitStart,
    NetDevices,
    Network,
    Parsed,
    Prefix,
    Ring,
    Transport,
    Trees,
    Version,
    Warn,
    WatchdogTimeout,
    parse_line,
)
from myolo.events.payloads import NcclChannel, NcclReport, NodeFault

MAX_CHANNELS = 512  # bound the size of one report; a 32-channel, 8-peer comm stays well under it
MAX_WARNINGS = 32


@dataclass(slots=True)
class _Comm:
    info: CommInfo | None = None
    transports: list[Transport] = field(default_factory=list)
    rings: list[Ring] = field(default_factory=list)
    trees: list[str] = field(default_factory=list)
    counts: ChannelCounts | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Process:
    version: str | None = None
    network: str | None = None
    algo_env: str | None = None  # NCCL_ALGO as NCCL read it
    net_devices: tuple[str, ...] = ()
    building: dict[int, _Comm] = field(default_factory=dict)  # by CUDA device
    nvml_index: dict[int, int] = field(default_factory=dict)  # CUDA device -> NVML index, from Init COMPLETE
    ranks: dict[int, int] = field(default_factory=dict)  # CUDA device -> last rank seen


@dataclass(slots=True)
class _Repeat:
    first_at: float
    suppressed: int = 0


def _add(comm: _Comm, rec: Transport | Ring | Trees | ChannelCounts) -> None:
    match rec:
        case Transport():
            if len(comm.transports) < MAX_CHANNELS:
                comm.transports.append(rec)
        case Ring():
            comm.rings.append(rec)
        case Trees():
            comm.trees.append(rec.text)
        case ChannelCounts():
            comm.counts = rec


class NcclTracker:
    """Feed lines with :meth:`feed`; get back the payloads to publish (``NcclReport`` and ``NodeFault``).

    ``pid`` is the trainer process the log belongs to when known (it names the process for PyTorch
    watchdog lines, which carry no NCCL prefix). Identical warnings from one process within
    ``warn_repeat_s`` are folded into one fault: NCCL repeats a failing connection's warning per retry.
    """

    def __init__(
        self,
        node_id: str,
        *,
        pid: int | None = None,
        job_id: str | None = None,
        generation: int | None = None,
        warn_repeat_s: float = 60.0,
    ) -> None:
        if warn_repeat_s < 0:
            raise ValueError(f"warn_repeat_s must be >= 0 seconds, got {warn_repeat_s}")
        self.node_id = node_id
        self.pid = pid
        self.job_id = job_id
        self.generation = generation
        self.warn_repeat_s = warn_repeat_s
        self.lines = 0
        self.recognised = 0
        self._procs: dict[int, _Process] = {}
        self._bare_version: str | None = None
        self._last_pid: int | None = pid
        self._repeats: dict[tuple[int | None, str], _Repeat] = {}

    def feed(self, line: str, now: float) -> list[NcclReport | NodeFault]:
        """Take one line seen at ``now`` (seconds, from the agent's clock); return what to publish."""
        self.lines += 1
        try:
            parsed = parse_line(line)
        except Exception:  # a regex edge case must never stop the agent's log watch
            return []
        if parsed is None:
            return []
        self.recognised += 1
        return self._apply(parsed, now)

    def feed_many(self, lines: Iterable[str], now: float) -> list[NcclReport | NodeFault]:
        out: list[NcclReport | NodeFault] = []
        for line in lines:
            out.extend(self.feed(line, now))
        return out

    def _proc(self, prefix: Prefix) -> _Process:
        self._last_pid = prefix.pid
        return self._procs.setdefault(prefix.pid, _Process())

    def _apply(self, parsed: Parsed, now: float) -> list[NcclReport | NodeFault]:
        rec, prefix = parsed.record, parsed.prefix
        if isinstance(rec, WatchdogTimeout):
            return [self._timeout(rec)]
        if prefix is None:
            if isinstance(rec, Version):
                self._bare_version = rec.version
            return []
        proc = self._proc(prefix)
        dev = prefix.cuda_dev
        match rec:
            case Version():
                proc.version = rec.version
            case Network():
                proc.network = rec.network
            case AlgoSet():
                proc.algo_env = rec.algo
            case NetDevices():
                proc.net_devices = rec.devices
            case InitStart():
                proc.building[dev] = _Comm()
                proc.ranks[dev] = rec.rank
            case CommInfo():
                comm = proc.building.get(dev)
                if comm is None or comm.info is not None:
                    comm = proc.building[dev] = _Comm()
                comm.info = rec
                proc.ranks[dev] = rec.rank
            case Transport() | Ring() | Trees() | ChannelCounts():
                if (comm := self._building(proc, dev)) is not None:
                    _add(comm, rec)
            case InitComplete():
                return [self._report(prefix.pid, proc, proc.building.pop(dev, _Comm()), rec)]
            case Warn():
                if dev in proc.building and len(proc.building[dev].warnings) < MAX_WARNINGS:
                    proc.building[dev].warnings.append(rec.message)
                fault = self._warn(prefix, proc, rec, now)
                return [fault] if fault else []
        return []

    @staticmethod
    def _building(proc: _Process, dev: int) -> _Comm | None:
        """The communicator being built on ``dev``. Old NCCL prints no ``comm`` line before its rings, so a
        device that never completed one starts a build implicitly; after a completed one, stray channel
        lines are the lazy p2p connections of that communicator and belong to no new report."""
        comm = proc.building.get(dev)
        if comm is None and dev not in proc.nvml_index:
            comm = proc.building[dev] = _Comm()
        return comm

    def _report(self, pid: int, proc: _Process, comm: _Comm, done: InitComplete) -> NcclReport:
        proc.nvml_index[done.cuda_dev] = done.nvml_dev if done.nvml_dev is not None else done.cuda_dev
        proc.ranks[done.cuda_dev] = done.rank
        info = comm.info
        kinds = sorted({t.kind for t in comm.transports})
        counts = comm.counts or ChannelCounts()
        return NcclReport(
            node_id=self.node_id,
            pid=pid,
            rank=done.rank,
            nranks=done.nranks,
            nnodes=info.nnodes if info else None,
            local_rank=info.local_rank if info else None,
            cuda_dev=done.cuda_dev,
            comm_id=done.comm_id or done.comm,
            version=proc.version or self._bare_version,
            network=proc.network,
            algo=proc.algo_env,
            net_devices=list(proc.net_devices),
            transports=kinds,
            channels=[
                NcclChannel(channel=t.channel, src=t.src, dst=t.dst, transport=t.via, direction=t.direction)  # type: ignore[arg-type]
                for t in comm.transports
            ],
            rings=[f"{r.channel:02d}: {' '.join(map(str, r.ranks))}" for r in comm.rings],
            trees=comm.trees,
            coll_channels=counts.coll,
            p2p_channels=counts.p2p,
            init_complete=True,
            warnings=comm.warnings,
            job_id=self.job_id,
            generation=self.generation,
        )

    def _warn(self, prefix: Prefix, proc: _Process, rec: Warn, now: float) -> NodeFault | None:
        key = (prefix.pid, rec.message)
        seen = self._repeats.get(key)
        if seen is not None and now - seen.first_at < self.warn_repeat_s:
            seen.suppressed += 1
            return None
        suppressed = seen.suppressed if seen else 0
        self._repeats[key] = _Repeat(first_at=now)
        if len(self._repeats) > 4096:  # forget old keys so a chatty process cannot grow the agent
            self._repeats = {k: v for k, v in self._repeats.items() if now - v.first_at < self.warn_repeat_s}
        where = f" at {rec.location}" if rec.location else ""
        rank = proc.ranks.get(prefix.cuda_dev)
        reasons = [f"NCCL WARN from pid {prefix.pid} (cuda device {prefix.cuda_dev}{where})"]
        if rank is not None:
            reasons.append(f"rank {rank}")
        if suppressed:
            reasons.append(f"{suppressed} identical warnings folded in the previous {self.warn_repeat_s:g} s")
        return NodeFault(
            node_id=self.node_id,
            kind="nccl_warn",
            health="warn",
            reasons=reasons,
            gpu_index=proc.nvml_index.get(prefix.cuda_dev),
            message=rec.message,
        )

    def _timeout(self, rec: WatchdogTimeout) -> NodeFault:
        pid = self.pid if self.pid is not None else self._last_pid
        what = f"{rec.op or 'collective'} SeqNum={rec.seq}" if rec.seq is not None else (rec.op or "collective")
        limit = f" (timeout {rec.timeout_ms} ms)" if rec.timeout_ms is not None else ""
        reasons = [f"PyTorch watchdog: rank {rec.rank} {what} ran {rec.ran_ms} ms{limit}"]
        if pid is not None:
            reasons.append(f"pid {pid}")
        gpu = None
        if pid is not None and (proc := self._procs.get(pid)) is not None:
            devs = [d for d, r in proc.ranks.items() if r == rec.rank]
            if devs:
                gpu = proc.nvml_index.get(devs[0])
        return NodeFault(
            node_id=self.node_id,
            kind="nccl_timeout",
            health="fail",
            reasons=reasons,
            gpu_index=gpu,
            message="collective operation timed out: " + ", ".join(f"{k}={v}" for k, v in rec.fields.items()),
        )
