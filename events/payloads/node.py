"""What the agent reports about a node: periodic samples and faults."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from myolo.events.payloads.common import Fraction, Health, Host, HttpUrl, Id, NonNegFloat, NonNegInt, Payload, Percent
from myolo.events.payloads.training import WorkerInfo


class GpuProcess(Payload, kw_only=True):
    pid: NonNegInt
    used_bytes: NonNegInt | None = None
    name: str | None = None


NvLinkCounter = Literal["replay_errors", "recovery_errors", "crc_flit_errors", "crc_data_errors"]
NVLINK_COUNTERS: tuple[NvLinkCounter, ...] = ("replay_errors", "recovery_errors", "crc_flit_errors", "crc_data_errors")


class NvLink(Payload, kw_only=True):
    """One NVLink of a GPU: up or down, and its cumulative error counters (absent: not supported).

    A published sample lists only the links with something to say (down, or a counter above zero); the
    GPU's ``nvlink_links``/``nvlink_active``/``nvlink_*_errors`` summarise every link. ``active`` has no
    default, so it is always encoded and readers of either form decode every listed link."""

    link: NonNegInt
    active: bool
    replay_errors: NonNegInt | None = None
    recovery_errors: NonNegInt | None = None
    crc_flit_errors: NonNegInt | None = None
    crc_data_errors: NonNegInt | None = None


class GpuReading(Payload, kw_only=True):
    """One GPU at one instant. Every field but identity is optional: absent means "not supported".

    NVLink comes in two forms. As read, ``nvlink`` lists every link. As published
    (:func:`myolo.events.payloads.compact.compact_gpu`), the summary fields count the links (``nvlink_links``), those
    up (``nvlink_active``) and sum each error counter over every link (absent: no link reports it), and
    ``nvlink`` keeps only the links that are down or count an error: a link not listed is up with every
    reported counter at zero. Read either form through :attr:`nvlink_up`, :meth:`nvlink_error_total` and
    :meth:`nvlink_link`."""

    index: NonNegInt
    uuid: Id
    name: str
    pci_bus_id: Annotated[str, msgspec.Meta(max_length=32)] | None = None  # "00000000:8D:00.0"
    minor_number: NonNegInt | None = None  # of /dev/nvidiaN
    util_gpu: Percent | None = None
    util_mem: Percent | None = None
    util_enc: Percent | None = None
    util_dec: Percent | None = None
    # profiling ratios (0-1) of the last interval: graphics engine, tensor pipe, memory interface active
    prof_gr_engine_active: Fraction | None = None
    prof_pipe_tensor_active: Fraction | None = None
    prof_dram_active: Fraction | None = None
    mem_total_bytes: NonNegInt | None = None
    mem_used_bytes: NonNegInt | None = None
    mem_free_bytes: NonNegInt | None = None
    mem_reserved_bytes: NonNegInt | None = None
    power_w: NonNegFloat | None = None
    power_limit_w: NonNegFloat | None = None
    energy_j: NonNegFloat | None = None
    temp_gpu_c: float | None = None
    temp_mem_c: float | None = None
    clock_sm_mhz: NonNegInt | None = None
    clock_mem_mhz: NonNegInt | None = None
    clock_event_reasons: list[str] | None = None
    violation_power_ns: NonNegInt | None = None
    violation_thermal_ns: NonNegInt | None = None
    ecc_corrected_volatile: NonNegInt | None = None
    ecc_uncorrected_volatile: NonNegInt | None = None
    ecc_corrected_aggregate: NonNegInt | None = None
    ecc_uncorrected_aggregate: NonNegInt | None = None
    retired_pages_sbe: NonNegInt | None = None
    retired_pages_dbe: NonNegInt | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: NonNegInt | None = None
    remapped_rows_uncorrectable: NonNegInt | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    pcie_tx_bytes_s: NonNegFloat | None = None
    pcie_rx_bytes_s: NonNegFloat | None = None
    pcie_replay_counter: NonNegInt | None = None
    pcie_link_gen: NonNegInt | None = None
    pcie_link_width: NonNegInt | None = None
    nvlink: list[NvLink] | None = None
    nvlink_links: NonNegInt | None = None
    nvlink_active: NonNegInt | None = None
    nvlink_replay_errors: NonNegInt | None = None
    nvlink_recovery_errors: NonNegInt | None = None
    nvlink_crc_flit_errors: NonNegInt | None = None
    nvlink_crc_data_errors: NonNegInt | None = None
    nvlink_tx_bytes: NonNegInt | None = None
    nvlink_rx_bytes: NonNegInt | None = None
    processes: list[GpuProcess] | None = None
    health: Health = "ok"
    health_reasons: list[str] = []

    @property
    def mem_used_pct(self) -> float | None:
        """Memory used, in % of the total (None: either is not reported)."""
        if self.mem_used_bytes is None or not self.mem_total_bytes:
            return None
        return 100.0 * self.mem_used_bytes / self.mem_total_bytes

    @property
    def nvlink_up(self) -> tuple[int, int] | None:
        """(links up, links) in either form; None: NVLink not reported."""
        if self.nvlink_links is not None:
            if self.nvlink_active is not None:
                return self.nvlink_active, self.nvlink_links
            return self.nvlink_links - sum(1 for nl in self.nvlink or () if not nl.active), self.nvlink_links
        if self.nvlink is None:
            return None
        return sum(1 for nl in self.nvlink if nl.active), len(self.nvlink)

    def nvlink_error_total(self, counter: NvLinkCounter) -> int | None:
        """``counter`` summed over every link in either form; None: no link reports it."""
        total: int | None = getattr(self, f"nvlink_{counter}")
        if total is not None or self.nvlink_links is not None:
            return total
        known = [n for n in (getattr(nl, counter) for nl in self.nvlink or ()) if n is not None]
        return sum(known) if known else None

    def nvlink_link(self, link: int) -> NvLink | None:
        """Link ``link`` (one the GPU has) in either form: the listed one, else, in the summarised form, up with
        every reported counter at zero. None: the full list does not have it, or NVLink is not reported."""
        for nl in self.nvlink or ():
            if nl.link == link:
                return nl
        if self.nvlink_links is None:
            return None
        zeros = {c: 0 for c in NVLINK_COUNTERS if getattr(self, f"nvlink_{c}") is not None}
        return NvLink(link=link, active=True, **zeros)


class HostReading(Payload, kw_only=True):
    cpu_percent: Percent | None = None
    mem_total_bytes: NonNegInt | None = None
    mem_used_bytes: NonNegInt | None = None
    load1: NonNegFloat | None = None


ReleaseComponent = Literal["agent", "trainer"]
ErrorTail = Annotated[str, msgspec.Meta(max_length=4000)]


class FailedRelease(msgspec.Struct, frozen=True, kw_only=True):
    """A release the node tried and switched back from by itself: it never committed (the agent: READY, a
    sample published and its command consumer joined; the trainer: workers that reached their first step)
    within its tries. ``restored``: what runs again (None: the base install); ``reason``: why the last try
    failed (it exited, missed its watchdog, never committed); ``error``: the last try's output, its tail."""

    component: ReleaseComponent
    version: str
    restored: str | None
    tries: NonNegInt
    reason: Annotated[str, msgspec.Meta(max_length=500)] = ""
    error: ErrorTail = ""
    at: NonNegFloat = 0.0


class NodeSample(Payload, kw_only=True):
    """``ai.myolo.node.sample.v1``: one reading of every GPU of a node. ``backend`` is ``nvml`` or ``sim``;
    simulated hardware is labelled as such in every sample.

    ``address`` is where other nodes reach this one (the rendezvous of a job generation whose global rank 0
    runs here); ``health_url`` is the agent's HTTP endpoint (health, workers' logs). Absent from agents that
    do not say."""

    node_id: Id
    backend: Literal["nvml", "sim"]
    gpus: list[GpuReading]
    seq: NonNegInt = 0
    interval_s: NonNegFloat = 1.0
    health: Health = "ok"
    health_reasons: list[str] = []
    host: HostReading | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    agent_version: str | None = None
    workers: Annotated[list[WorkerInfo], msgspec.Meta(max_length=1024)] | None = None  # the agent's trainer processes
    address: Host | None = None
    health_url: HttpUrl | None = None
    # the agent release running on trial (not committed yet: it may still be taken back); None: committed
    agent_on_trial: str | None = None
    # releases this node rolled back by itself, the newest per component, until a later one commits
    failed_releases: Annotated[list[FailedRelease], msgspec.Meta(max_length=2)] = []


FaultKind = Literal["xid", "ecc", "health", "nccl_warn", "nccl_timeout", "leak", "lost", "process", "spool", "release"]


class NodeFault(Payload, kw_only=True):
    """``ai.myolo.node.fault.v1``: something went wrong on a node, published the moment it is seen."""

    node_id: Id
    kind: FaultKind
    health: Health
    reasons: list[str] = []
    gpu_index: NonNegInt | None = None
    gpu_uuid: str | None = None
    xid: NonNegInt | None = None
    message: str | None = None
    simulated: bool = False
