"""Turn one line of NCCL_DEBUG=INFO output (or a PyTorch watchdog line) into a typed record.

Why line by line and regex based: trainer logs interleave NCCL, PyTorch and user output from several
threads and ranks, lines get cut when a process dies, and NCCL's wording shifts between releases. Each
pattern therefore matches one fact in a forgiving way, and anything unrecognised yields ``None`` instead of
an error: the agent must survive any garbage a trainer prints.

Every NCCL line starts ``host:pid:tid [cudaDev] NCCL INFO|WARN``; the prefix gives the process and device
the fact belongs to (one log often carries all local ranks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# host:pid:tid [dev] (optional "file.cc:123 ") NCCL LEVEL message
_PREFIX = re.compile(
    r"(?:^|[\s\]:])(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?:(?P<loc>\S+:\d+) )?NCCL (?P<level>INFO|WARN|ABORT|TRACE) ?(?P<msg>.*)$"
)
_VERSION = re.compile(r"NCCL version (?P<version>\d+\.\d+\.\d+\S*)")
_USING_NET = re.compile(r"^Using network (?P<net>.+?)\s*$")
_ALGO_ENV = re.compile(r"^NCCL_ALGO set by environment to (?P<algo>\S+)")
_NET_DEVICES = re.compile(r"^NET/(?P<kind>[\w.]+)\s*: Using (?P<rest>.*)$")
_NET_DEVICE = re.compile(r"\[\d+\](?P<dev>[^\s;\[]+)")
_COMM = re.compile(
    r"comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+) "
    r"localRanks (?P<local_ranks>\d+) localRank (?P<local_rank>\d+)",
    re.IGNORECASE,
)
_INIT_COMPLETE = re.compile(
    r"comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cuda_dev>\d+)"
    r"(?: nvmlDev (?P<nvml_dev>\d+))?(?: busId (?P<bus_id>[0-9a-fA-F]+))?(?: commId (?P<comm_id>0x[0-9a-fA-F]+))?"
    r".*- Init (?P<phase>START|COMPLETE)",
    re.IGNORECASE,
)
# "Channel 00/0 : 2[2] -> 3[3] via P2P/..."; "Channel 03/0 : 7[3] -> 3[3] [receive] via NET/IB/3/GDRDMA";
# older NCCL: "Ring 00 : 1[23000] -> 8[1e000] [send] via NET/IB/1/GDRDMA".
_TRANSPORT = re.compile(
    r"^(?:Channel|Ring) (?P<ch>\d+)(?:/\d+)? : (?P<src>\d+\[[0-9a-fA-F]+\]) -> (?P<dst>\d+\[[0-9a-fA-F]+\])"
    r"(?: \[(?P<dir>send|receive)\])? via (?P<via>\S.*?)\s*$"
)
# "Channel 00/02 :    0   1   2   3"; older "Ring 00 : 0 1 2 3".
_RING = re.compile(r"^(?:Channel|Ring) (?P<ch>\d+)(?:/\d+)? :(?P<ranks>(?:\s+\d+)+)\s*$")
_TREES = re.compile(r"^Trees? (?P<trees>\[\d+\].*?)\s*$")
_COUNTS = re.compile(r"(?P<n>\d+) (?P<what>coll|collnet|nvls|p2p) channels(?P<per_peer> per peer)?")
# PyTorch ProcessGroupNCCL watchdog (the "[rank0]:[E...]" prefix and the "[PG ID ...]" tag vary by release).
_WATCHDOG = re.compile(
    r"Rank (?P<rank>\d+)\] Watchdog caught collective operation timeout: WorkNCCL\((?P<work>.*?)\) ran for (?P<ran_ms>\d+) milliseconds"
)
_WORK_FIELD = re.compile(r"(?P<key>[A-Za-z]+(?:\(ms\))?)=(?P<value>[^,]+)")


@dataclass(frozen=True, slots=True)
class Prefix:
    """Where an NCCL line came from."""

    host: str
    pid: int
    tid: int
    cuda_dev: int


@dataclass(frozen=True, slots=True)
class Version:
    version: str


@dataclass(frozen=True, slots=True)
class AlgoSet:
    """``NCCL_ALGO set by environment to Ring``: the algorithms the process was told to use."""

    algo: str


@dataclass(frozen=True, slots=True)
class Network:
    """``Using network IB``: the network plugin the process picked."""

    network: str


@dataclass(frozen=True, slots=True)
class NetDevices:
    """``NET/IB : Using [0]mlx5_0:1/IB ...``: the NICs NCCL will use."""

    kind: str
    devices: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CommInfo:
    """``comm 0x.. rank r nRanks n nNodes k localRanks l localRank j``: a communicator being built."""

    comm: str
    rank: int
    nranks: int
    nnodes: int
    local_ranks: int
    local_rank: int


@dataclass(frozen=True, slots=True)
class Transport:
    """One channel connection and how it travels (P2P, SHM, NET/IB[/GDRDMA], NET/Socket)."""

    channel: int
    src: str
    dst: str
    via: str
    direction: str  # send, receive or both

    @property
    def kind(self) -> str:
        """The transport family without device numbers: ``NET/IB/3/GDRDMA`` -> ``NET/IB/GDRDMA``."""
        return transport_kind(self.via)


@dataclass(frozen=True, slots=True)
class Ring:
    channel: int
    ranks: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Trees:
    text: str


@dataclass(frozen=True, slots=True)
class ChannelCounts:
    coll: int | None = None
    collnet: int | None = None
    nvls: int | None = None
    p2p: int | None = None
    p2p_per_peer: int | None = None


@dataclass(frozen=True, slots=True)
class InitComplete:
    comm: str
    rank: int
    nranks: int
    cuda_dev: int
    nvml_dev: int | None = None
    bus_id: str | None = None
    comm_id: str | None = None


@dataclass(frozen=True, slots=True)
class InitStart:
    """``comm 0x.. rank r nranks n cudaDev d .. - Init START``: a communicator starts being built."""

    comm: str
    rank: int
    nranks: int
    cuda_dev: int


@dataclass(frozen=True, slots=True)
class Warn:
    message: str
    location: str | None = None


@dataclass(frozen=True, slots=True)
class WatchdogTimeout:
    """PyTorch gave up waiting on a collective: the job is hung or a peer died."""

    rank: int
    ran_ms: int
    seq: int | None = None
    op: str | None = None
    timeout_ms: int | None = None
    fields: dict[str, str] = field(default_factory=dict)


Record = (
    Version
    | Network
    | NetDevices
    | CommInfo
    | Transport
    | AlgoSet
    | Ring
    | Trees
    | ChannelCounts
    | InitStart
    | InitComplete
    | Warn
    | WatchdogTimeout
)


@dataclass(frozen=True, slots=True)
class Parsed:
    """A recognised line: the record, and the NCCL prefix when the line had one."""

    record: Record
    prefix: Prefix | None = None


def transport_kind(via: str) -> str:
    """Reduce ``via`` to its family: keep P2P/SHM/NET/IB/Socket/GDRDMA words, drop ports and plugin versions."""
    parts = via.replace(" ", "/").split("/")
    head = parts[0].upper()
    if head == "NET" and len(parts) > 1:
        net = re.sub(r"(ext)?(_v\d+)?$", "", parts[1]) or parts[1]
        kind = f"NET/{net}"
        return f"{kind}/GDRDMA" if "GDRDMA" in parts else kind
    return head


def _to_int(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def parse_message(msg: str, level: str = "INFO") -> Record | None:
    """Parse the message part of an NCCL line (after ``NCCL INFO``)."""
    msg = msg.strip()
    if level in ("WARN", "ABORT"):
        return Warn(message=msg) if msg else None
    if m := _INIT_COMPLETE.search(msg):
        if m["phase"].upper() == "START":
            return InitStart(comm=m["comm"], rank=int(m["rank"]), nranks=int(m["nranks"]), cuda_dev=int(m["cuda_dev"]))
        return InitComplete(
            comm=m["comm"],
            rank=int(m["rank"]),
            nranks=int(m["nranks"]),
            cuda_dev=int(m["cuda_dev"]),
            nvml_dev=int(m["nvml_dev"]) if m["nvml_dev"] else None,
            bus_id=m["bus_id"],
            comm_id=m["comm_id"],
        )
    if m := _COMM.search(msg):
        return CommInfo(
            comm=m["comm"],
            rank=int(m["rank"]),
            nranks=int(m["nranks"]),
            nnodes=int(m["nnodes"]),
            local_ranks=int(m["local_ranks"]),
            local_rank=int(m["local_rank"]),
        )
    if m := _TRANSPORT.match(msg):
        return Transport(channel=int(m["ch"]), src=m["src"], dst=m["dst"], via=m["via"], direction=m["dir"] or "both")
    if m := _RING.match(msg):
        return Ring(channel=int(m["ch"]), ranks=tuple(int(r) for r in m["ranks"].split()))
    if m := _TREES.match(msg):
        return Trees(text=m["trees"])
    if m := _USING_NET.match(msg):
        return Network(network=m["net"])
    if m := _ALGO_ENV.match(msg):
        return AlgoSet(algo=m["algo"])
    if m := _NET_DEVICES.match(msg):
        devices = tuple(d["dev"] for d in _NET_DEVICE.finditer(m["rest"]))
        return NetDevices(kind=m["kind"], devices=devices) if devices else None
    if m := _VERSION.search(msg):
        return Version(version=m["version"])
    if "channels" in msg:
        counts: dict[str, int] = {}
        for c in _COUNTS.finditer(msg):
            key = "p2p_per_peer" if c["what"] == "p2p" and c["per_peer"] else c["what"]
            counts[key] = int(c["n"])
        return ChannelCounts(**counts) if counts else None
    return None


def _watchdog(line: str) -> WatchdogTimeout | None:
    m = _WATCHDOG.search(line)
    if m is None:
        return None
    fields = {f["key"]: f["value"].strip() for f in _WORK_FIELD.finditer(m["work"])}
    return WatchdogTimeout(
        rank=int(m["rank"]),
        ran_ms=int(m["ran_ms"]),
        seq=_to_int(fields.get("SeqNum", "")),
        op=fields.get("OpType"),
        timeout_ms=_to_int(fields.get("Timeout(ms)", "")),
        fields=fields,
    )


def parse_line(line: str) -> Parsed | None:
    """Parse one log line; ``None`` for anything that is not a fact we track (never raises on text)."""
    line = line.rstrip("\r\n")
    if "NCCL" not in line and "Watchdog" not in line:
        return None
    if m := _PREFIX.search(line):
        prefix = Prefix(host=m["host"], pid=int(m["pid"]), tid=int(m["tid"]), cuda_dev=int(m["dev"]))
        record = parse_message(m["msg"], m["level"])
        if isinstance(record, Warn) and m["loc"]:
            record = Warn(message=record.message, location=m["loc"])
        return Parsed(record, prefix) if record is not None else None
    if "Watchdog caught" in line:
        wd = _watchdog(line)
        return Parsed(wd) if wd else None
    # "NCCL version 2.19.3+cuda12.3" printed bare (NCCL_DEBUG=VERSION, or by the launcher).
    if (m := _VERSION.match(line.strip())) is not None:
        return Parsed(Version(version=m["version"]))
    return None
