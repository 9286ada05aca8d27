"""Thousands of simulated agents in one asyncio process, publishing to a real broker.

Each node samples at ``rate_hz``; nodes are spread evenly over the period in small time slots (10 ms by
default), so a 2,000-node fleet sends ~20 samples every 10 ms rather than 2,000 in one burst, as independent
agents would. A slot steps its nodes' GPU physics in one numpy call (:mod:`myolo.agent.fleetsim.model`) and fills
each node's pre-encoded sample (:mod:`myolo.agent.fleetsim.template`); records go to the same topics, with the same
keys, headers and producer settings as a real agent's, so the coordinator cannot tell the difference except
by ``backend: "sim"`` and ``simulated: true``, which are there on purpose.

Faults arrive at random (``fault_rate`` per second, fleet-wide) or on demand (:meth:`inject_fault`, which
records the moment it handed the fault to the producer: the start of a fault-to-cordon measurement). Each
fault is signed with its node's key, as a real agent signs it: ``node_keys`` (node id -> key) or, by default,
keys generated in memory; ``public_keys()`` is what a test or benchmark enrols.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field

from myolo.agent.fleetsim.faults import DEFAULT_MIX, FaultPlan, xid_fault
from myolo.agent.fleetsim.model import FleetModel
from myolo.agent.fleetsim.sink import KafkaSink, RecordSink, partition_of
from myolo.agent.fleetsim.template import gpu_uuid, sample_template
from myolo.common.clock import Clock, SystemClock
from myolo.common.keys import Ed25519Public, Ed25519Signer
from myolo.events.codec import decode, encode
from myolo.events.envelope import new_event, rfc3339
from myolo.events.payloads.common import HEALTH_RANK
from myolo.events.settings import KafkaSettings
from myolo.events.signing import sign
from myolo.events.topics import NODE_FAULTS, NODE_SAMPLES
from myolo.events.types import NODE_SAMPLE_V1

_SPEC = ("ce_specversion", b"1.0")
_TYPE = ("ce_type", NODE_SAMPLE_V1.encode())
_CTYPE = ("content-type", b"application/json")


@dataclass
class FleetStats:
    """What the simulator did and what it cost (``cpu_s`` is this process's CPU time while running)."""

    samples_sent: int = 0
    run_samples: int = 0  # sent by run() (paced), the denominator of the cost figures
    faults_sent: int = 0
    send_errors: int = 0
    slots: int = 0
    late_slots: int = 0  # slots that started more than half a slot late
    max_lateness_s: float = 0.0
    build_s: float = 0.0  # wall time spent stepping the model and filling templates
    cpu_s: float = 0.0
    wall_s: float = 0.0

    def cpu_per_sample_us(self) -> float:
        return self.cpu_s / self.run_samples * 1e6 if self.run_samples else 0.0

    def as_dict(self) -> dict[str, float | int]:
        d = {k: round(v, 3) if isinstance(v, float) else v for k, v in self.__dict__.items()}
        d["cpu_per_sample_us"] = round(self.cpu_per_sample_us(), 1)
        d["cpu_share_of_one_core"] = round(self.cpu_s / self.wall_s, 3) if self.wall_s else 0.0
        d["samples_per_s"] = round(self.run_samples / self.wall_s, 1) if self.wall_s else 0.0
        return d


@dataclass
class SentFault:
    """A fault as sent: ``sent_at`` is the clock's wall time (``clock.now()``) and ``sent_perf`` the
    ``time.perf_counter()`` just before it was handed to the producer; ``acked_perf`` when the broker had it."""

    node_id: str
    event_id: str
    xid: int
    gpu: int
    health: str
    sent_at: float
    sent_perf: float
    injected: bool
    acked_perf: float | None = None


@dataclass
class _Node:
    health: str = "ok"
    reasons: list[str] = field(default_factory=list)
    gpu_health: dict[int, tuple[str, tuple[str, ...]]] = field(default_factory=dict)


class FleetSimulator:
    """``nodes`` simulated agents with ``gpus`` GPUs each, sampling at ``rate_hz``, faulting at ``fault_rate``
    faults per second across the fleet. ``await start()``, then ``await run(duration)`` (or ``send_round()``
    to publish one sample of every node at once), ``await stop()``."""

    def __init__(
        self,
        settings: KafkaSettings | None,
        nodes: int,
        gpus: int = 8,
        rate_hz: float = 1.0,
        fault_rate: float = 0.0,
        clock: Clock | None = None,
        *,
        seed: int = 0,
        node_prefix: str = "sim-node-",
        slot_s: float = 0.01,
        sink: RecordSink | None = None,
        samples_topic: str = NODE_SAMPLES,
        faults_topic: str = NODE_FAULTS,
        fault_mix: tuple[tuple[int, float], ...] = DEFAULT_MIX,
        run_id: str | None = None,
        node_keys: dict[str, Ed25519Signer] | None = None,
    ) -> None:
        if nodes < 1:
            raise ValueError(f"nodes: need at least 1 simulated node, got {nodes}")
        if not 1 <= gpus <= 64:
            raise ValueError(f"gpus: 1..64 GPUs per node, got {gpus}")
        if not 0 < rate_hz <= 100:
            raise ValueError(f"rate_hz: samples per second per node must be in (0, 100], got {rate_hz}")
        if sink is None and settings is None:
            raise ValueError("settings: give Kafka settings (or a sink) so the simulator has somewhere to send")
        self.nodes, self.gpus, self.rate_hz = nodes, gpus, rate_hz
        self.clock = clock or SystemClock()
        self.period = 1.0 / rate_hz
        self.n_slots = max(1, min(nodes, round(self.period / slot_s)))
        self.samples_topic, self.faults_topic = samples_topic, faults_topic
        self.sink: RecordSink = sink if sink is not None else KafkaSink(settings)  # type: ignore[arg-type]
        self.model = FleetModel(nodes, gpus, seed=seed)
        self.plan = FaultPlan(fault_rate, nodes, gpus, seed=seed + 1, mix=fault_mix)
        self.stats = FleetStats()
        self.faults: list[SentFault] = []
        width = max(5, len(str(nodes - 1)))
        self.node_ids = [f"{node_prefix}{i:0{width}d}" for i in range(nodes)]
        self._index = {n: i for i, n in enumerate(self.node_ids)}
        keys = node_keys or {}
        if missing := [n for n in self.node_ids if node_keys is not None and n not in keys]:
            raise ValueError(f"node_keys: no key for {len(missing)} node(s), e.g. {missing[0]!r}")
        self.node_keys = {n: keys.get(n) or Ed25519Signer.generate() for n in self.node_ids}
        run = run_id or os.urandom(4).hex()
        self._keys = [n.encode() for n in self.node_ids]
        self._sources = [("ce_source", f"/myolo/agent/{n}".encode()) for n in self.node_ids]
        self._id_prefix = [f"{run}-{i}-".encode() for i in range(nodes)]
        self._state = [_Node() for _ in range(nodes)]
        self._templates = [sample_template(n, gpus, self.model.spec, interval_s=self.period) for n in self.node_ids]
        self._sample_parts: list[int | None] = [None] * nodes
        self._fault_parts: list[int | None] = [None] * nodes
        self._stopping = asyncio.Event()

    # -- life -----------------------------------------------------------------------------------------------
    async def start(self) -> None:
        await self.sink.start()
        sp = await self.sink.partitions(self.samples_topic)
        fp = await self.sink.partitions(self.faults_topic)
        self._sample_parts = [partition_of(k, sp) for k in self._keys]
        self._fault_parts = [partition_of(k, fp) for k in self._keys]

    async def stop(self) -> None:
        self._stopping.set()
        await self.sink.flush()
        await self.sink.stop()

    def public_keys(self) -> dict[str, Ed25519Public]:
        """Every simulated node's public key, for enrolment."""
        return {n: key.public for n, key in self.node_keys.items()}

    def node_index(self, node: int | str) -> int:
        if isinstance(node, int):
            if not 0 <= node < self.nodes:
                raise ValueError(f"node: index {node} is outside 0..{self.nodes - 1}")
            return node
        try:
            return self._index[node]
        except KeyError:
            raise ValueError(f"node: {node!r} is not one of the simulated nodes ({self.node_ids[0]}...)") from None

    def slot_nodes(self, slot: int) -> range:
        """The nodes that sample in time slot ``slot`` (0..n_slots-1) of each period."""
        return range(slot * self.nodes // self.n_slots, (slot + 1) * self.nodes // self.n_slots)

    # -- publishing -----------------------------------------------------------------------------------------
    async def run(self, duration: float | None = None) -> FleetStats:
        """Publish until :meth:`stop` or for ``duration`` seconds of the clock. Slots fire at fixed times from
        the start (no drift); a slot that is late is sent at once and counted in ``stats.late_slots``."""
        clock = self.clock
        t0 = clock.monotonic()
        end = None if duration is None else t0 + duration
        slot_s = self.period / self.n_slots
        next_fault = t0 + self.plan.next_gap()
        cpu0, wall0, sent0 = time.process_time(), time.perf_counter(), self.stats.samples_sent
        i = 0
        try:
            while not self._stopping.is_set():
                due = t0 + i * slot_s
                if end is not None and due >= end - 1e-9:
                    break
                delay = due - clock.monotonic()
                if delay > 0:
                    await clock.sleep(delay)
                elif -delay > slot_s / 2:
                    self.stats.late_slots += 1
                    self.stats.max_lateness_s = max(self.stats.max_lateness_s, -delay)
                    await asyncio.sleep(0)  # let the producer's I/O run even when behind
                await self._send_slot(i % self.n_slots)
                while next_fault <= due:
                    node, gpu, xid = self.plan.draw()
                    await self._send_fault(node, gpu, xid, injected=False)
                    next_fault += self.plan.next_gap()
                i += 1
        finally:
            self.stats.cpu_s += time.process_time() - cpu0
            self.stats.wall_s += time.perf_counter() - wall0
            self.stats.run_samples += self.stats.samples_sent - sent0
        return self.stats

    async def send_round(self) -> None:
        """One sample of every node, now (prefilling a topic for a benchmark, or tests)."""
        for slot in range(self.n_slots):
            await self._send_slot(slot)

    async def _send_slot(self, slot: int) -> None:
        lo, hi = slot * self.nodes // self.n_slots, (slot + 1) * self.nodes // self.n_slots
        t = time.perf_counter()
        rows = self.model.step(lo, hi, self.period)
        when = ("ce_time", rfc3339(self.clock.now()).encode())
        templates, prefixes, sources = self._templates, self._id_prefix, self._sources
        records = []
        state = self._state
        for n, row in zip(range(lo, hi), rows, strict=True):
            value = templates[n] % tuple(row)
            headers = [_SPEC, ("ce_id", prefixes[n] + b"%d" % row[-2]), sources[n], _TYPE, _CTYPE, when]
            if state[n].health != "ok":  # a sample that can make the coordinator act is signed, as an agent's
                value, headers = self._signed(n, value, headers)
            records.append((n, value, headers))
        self.stats.build_s += time.perf_counter() - t
        send, topic, keys, parts = self.sink.send, self.samples_topic, self._keys, self._sample_parts
        for n, value, headers in records:
            fut = await send(topic, value, keys[n], headers, parts[n])
            fut.add_done_callback(self._on_ack)
        self.stats.samples_sent += hi - lo
        self.stats.slots += 1

    def _signed(self, n: int, value: bytes, headers: list[tuple[str, bytes]]) -> tuple[bytes, list]:
        """The templated sample of an unhealthy node, signed with its key (myolo.events.signing.must_sign)."""
        event = sign(decode(value, headers, self._keys[n]), self.node_keys[self.node_ids[n]])
        _, value, headers = encode(event)
        return value, headers

    def _on_ack(self, fut: asyncio.Future) -> None:
        if fut.cancelled() or fut.exception() is not None:
            self.stats.send_errors += 1

    # -- faults ---------------------------------------------------------------------------------------------
    async def inject_fault(self, node: int | str, xid: int = 79, gpu: int = 0) -> SentFault:
        """Send an XID fault for ``node`` now and wait for the broker's ack. The returned record holds the
        time it was handed to the producer. A FAIL-class XID also turns the node's later samples to fail."""
        n = self.node_index(node)
        if not 0 <= gpu < self.gpus:
            raise ValueError(f"gpu: index {gpu} is outside 0..{self.gpus - 1}")
        return await self._send_fault(n, gpu, xid, injected=True, wait=True)

    async def _send_fault(self, n: int, gpu: int, xid: int, *, injected: bool, wait: bool = False) -> SentFault:
        node_id = self.node_ids[n]
        fault = xid_fault(node_id, gpu, xid, gpu_uuid(node_id, gpu))
        event = sign(new_event(fault, f"/myolo/agent/{node_id}", clock=self.clock), self.node_keys[node_id])
        key, value, headers = encode(event)
        sent = SentFault(node_id, event.id, xid, gpu, fault.health, self.clock.now(), time.perf_counter(), injected)
        fut = await self.sink.send(self.faults_topic, value, key, headers, self._fault_parts[n])  # type: ignore[arg-type]
        self.faults.append(sent)
        self.stats.faults_sent += 1
        self._degrade(n, gpu, fault.health, fault.reasons[0], xid)
        if wait:
            await fut
            sent.acked_perf = time.perf_counter()
        else:
            fut.add_done_callback(self._on_ack)
        return sent

    def _degrade(self, n: int, gpu: int, health: str, reason: str, xid: int) -> None:
        """After a WARN or FAIL fault the node's samples say so, as a real agent's would."""
        if health == "ok":
            return
        st = self._state[n]
        old = st.gpu_health.get(gpu, ("ok", ()))
        if HEALTH_RANK[health] >= HEALTH_RANK[old[0]]:
            st.gpu_health[gpu] = (health, (*old[1][-3:], f"gpu {gpu}: {reason}"))
        if HEALTH_RANK[health] >= HEALTH_RANK[st.health]:
            st.health = health
        st.reasons = [*st.reasons[-3:], f"gpu {gpu}: {reason}"]
        if xid == 79:
            self.model.pin_util(n, gpu, 0.0)  # off the bus: the GPU does nothing any more
        self._templates[n] = sample_template(
            self.node_ids[n],
            self.gpus,
            self.model.spec,
            interval_s=self.period,
            health=st.health,
            reasons=tuple(st.reasons),
            gpu_health=st.gpu_health,
        )

    def clear_faults(self, node: int | str) -> None:
        """Back to healthy (as after a GPU reset), for long runs that reuse nodes."""
        n = self.node_index(node)
        self._state[n] = _Node()
        self.model.pin_util(n, None, None)
        self._templates[n] = sample_template(self.node_ids[n], self.gpus, self.model.spec, interval_s=self.period)


__all__ = ["FleetSimulator", "FleetStats", "SentFault"]
