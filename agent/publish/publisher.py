"""Publish without loss and without blocking: spool first, then send in order, commit on the broker's ack.

``publish`` is synchronous and cheap (encode + one ``write`` to the spool), so the sample loop and the fault
path never wait for Kafka. A single sender task reads the spool in order, hands a batch to the
:class:`~myolo.events.bus.EventProducer` and commits it once every record is acknowledged. When the broker is away
the batch shrinks to one record (a probe), the sender backs off, and new events simply accumulate on disk,
bounded by the spool's cap: memory holds at most one batch whatever the outage's length. A failed batch is
retried only after aiokafka has settled every future of the previous attempt, so retries never stack copies in
the producer's buffer. Delivery is at least once (a batch partly acknowledged before a failure is resent);
consumers de-duplicate by event id.

With the node's key (``signer``), the node events that make the coordinator act (``myolo.events.signing.must_sign``:
faults, command acks, training faults and completions, and samples reporting warn or fail health) are signed
here, before they are spooled: the record sent later, whatever the outage, is the signed one, and the producer
sends it untouched. Telemetry (a healthy sample, NCCL and leak reports, progress) is not.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import structlog

from myolo.agent.config import PublishConfig
from myolo.agent.publish.loss import loss_fault, new_losses
from myolo.agent.spool import Spool, SpoolEntry, SpoolRecord
from myolo.common.clock import Clock, sleep_or_wake
from myolo.common.keys import Signer
from myolo.events.codec import decode, encode
from myolo.events.envelope import Event, new_event
from myolo.events.errors import InvalidEvent
from myolo.events.payloads import Payload
from myolo.events.signing import must_sign, sign
from myolo.events.topics import NODE_SAMPLES, topic_for_type

log = structlog.get_logger("myolo.agent.publish")
KafkaState = Literal["connecting", "ok", "away"]
HANDOVER_TIMEOUT_S = 1.0


class Producer(Protocol):
    """What the publisher needs of :class:`myolo.events.bus.EventProducer` (tests may pass a fake broker)."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def enqueue(self, payload: Event, topic: str | None = None) -> tuple[Event, asyncio.Future]: ...
    async def send_raw(self, topic: str, value: bytes | None, key: bytes | None, headers: list) -> object: ...


@dataclass
class PublisherStatus:
    kafka: KafkaState = "connecting"
    last_error: str | None = None
    last_ack_monotonic: float | None = None
    sent: int = 0
    failed_batches: int = 0
    write_error: str | None = None  # the spool's last write or fsync failed
    read_error: str | None = None  # the spool's last read failed (the sender retries)
    loss_faults: int = 0  # ``spool`` faults published about lost records

    @property
    def spool_error(self) -> str | None:
        """What keeps the spool from working now (the health endpoint reports it as failed)."""
        return self.write_error or self.read_error


class Publisher:
    """Owns the spool and the producer. Call :meth:`run` as a task; :meth:`close` flushes and stops."""

    def __init__(
        self,
        spool: Spool,
        producer_factory: Callable[[], Producer],
        *,
        source: str,
        node_id: str,
        clock: Clock,
        config: PublishConfig | None = None,
        signer: Signer | None = None,
    ) -> None:
        self.spool = spool
        self.signer = signer
        self.source = source
        self.node_id = node_id
        self.cfg = config or PublishConfig()
        self.status = PublisherStatus()
        self._factory = producer_factory
        self._clock = clock
        self._producer: Producer | None = None
        self._wake = asyncio.Event()
        self._committed = asyncio.Event()
        self._first_sample = asyncio.Event()
        self._stopping = asyncio.Event()  # close() sets it; a back-off wakes for it
        self._backoff = 0.1
        self._reported: dict[str, int] = {}
        self._reporting = False
        # told of every payload published, spooled or not (the metrics endpoint keeps what it shows from them)
        self.observers: list[Callable[[Payload], None]] = []

    # -- the producing side (sample loop, fault hook) -----------------------------------------------------
    def publish(self, payload: Payload, *, urgent: bool = False) -> Event:
        """Durably record ``payload`` as an event and wake the sender. Never waits for Kafka.

        ``urgent`` (faults) fsyncs the spool at once. A spool that cannot be written (disk full, I/O error) is
        logged and reported by the health endpoint; the event is then lost, which is counted.
        """
        event = new_event(payload, self.source, clock=self._clock)
        if self.signer is not None and must_sign(event):
            event = sign(event, self.signer)
        key, value, headers = encode(event)
        record = SpoolRecord(topic_for_type(event.type), key, value, headers)
        try:
            self.spool.append(record, sync=urgent)
        except OSError as exc:
            self.status.write_error = f"cannot write the spool in {self.spool.dir}: {exc.strerror or exc}"
            log.error("event lost", type=event.type, error=self.status.write_error)
        else:
            self.status.write_error = None
            self.report_losses()
        self._wake.set()
        for observe in self.observers:
            try:
                observe(payload)
            except Exception:  # an observer's bug must not lose the event or stop the caller
                log.exception("publish observer failed", type=event.type)
        return event

    def report_losses(self) -> None:
        """Publish a ``spool`` fault when records were lost since the last report (the cap, damage, failed
        writes). Not while the spool cannot be written: the losses add up and go out with the next fault."""
        if self._reporting or self.status.write_error is not None:
            return
        now = self.spool.stats()
        new = new_losses(now.losses(), self._reported)
        if not new:
            return
        self._reported = now.losses()
        self._reporting = True
        try:
            fault = loss_fault(self.node_id, new, now)
            log.warning("spool lost events: fault published", **new, dropped=now.dropped)
            self.publish(fault, urgent=True)
            self.status.loss_faults += 1
        finally:
            self._reporting = False

    async def wait_first_sample(self) -> None:
        """Return once a node sample has been acknowledged by Kafka (used for READY=1)."""
        await self._first_sample.wait()

    # -- the sending side ---------------------------------------------------------------------------------
    async def run(self) -> None:
        """Send spooled records forever (until :meth:`close`)."""
        batch = 1
        while not self._stopping.is_set():
            self.report_losses()
            if self._producer is None and not await self._connect():
                await self._pause()
                continue
            try:
                entries = self.spool.peek(batch)
            except Exception as exc:  # whatever the disk does, the sender lives on and retries
                self.status.read_error = f"cannot read the spool in {self.spool.dir}: {exc!r}"
                log.error("spool read failed; retrying", error=self.status.read_error)
                await self._pause()
                continue
            self.status.read_error = None
            if not entries:
                self._wake.clear()
                if self.spool.pending == 0:
                    await self._wake.wait()
                continue
            if await self._send(entries):
                batch = self.cfg.batch_records
                self._backoff = 0.1
            else:
                batch = 1
                await self._pause()

    async def sync_loop(self) -> None:
        """The ``interval`` fsync policy: fsync in a worker thread, so a slow disk never stalls the loop."""
        while True:
            await self._clock.sleep(self.spool.fsync_interval_s)
            if self.spool.sync_due():
                try:
                    await asyncio.to_thread(self.spool.sync)
                except OSError as exc:
                    self.status.write_error = f"fsync failed: {exc.strerror or exc}"

    async def drain(self, timeout_s: float) -> bool:
        """Wait until the spool is empty (everything acknowledged) or ``timeout_s`` of wall time passed.

        Uses the event loop's own timer on purpose: a shutdown deadline is real time even under a SimClock.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.spool.pending > 0 and self.status.kafka != "away":
            left = deadline - loop.time()
            if left <= 0:
                return False
            self._committed.clear()
            self._wake.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._committed.wait(), left)
        return self.spool.pending == 0

    async def close(self, flush_timeout_s: float = 5.0) -> None:
        """Flush what Kafka will take within the timeout; the rest stays in the spool for the next start."""
        await self.drain(flush_timeout_s)
        self._stopping.set()
        self._wake.set()
        if self._producer is not None:
            try:
                await asyncio.wait_for(self._producer.stop(), flush_timeout_s)
            except (TimeoutError, Exception) as exc:
                log.warning("kafka producer did not stop cleanly", error=repr(exc))
            self._producer = None
        self.spool.close()

    # -- internals ----------------------------------------------------------------------------------------
    async def _connect(self) -> bool:
        producer = self._factory()
        try:
            await asyncio.wait_for(producer.start(), self.cfg.send_timeout_s)
        except Exception as exc:
            self._away(f"cannot connect: {exc!r}")
            with contextlib.suppress(Exception):
                await asyncio.wait_for(producer.stop(), 1.0)
            return False
        self._producer = producer
        return True

    async def _send(self, entries: list[SpoolEntry]) -> bool:
        """Send a batch in order; commit the acknowledged prefix. True when all of it was acknowledged."""
        assert self._producer is not None
        futures: list[asyncio.Future] = []
        error: str | None = None
        try:
            # Handing a batch over is instant while the broker is up (the producer knows the topic's leaders from
            # start-up); when it is not, aiokafka retries metadata in a tight loop, so give up quickly.
            async with asyncio.timeout(min(self.cfg.send_timeout_s, HANDOVER_TIMEOUT_S)):
                for entry in entries:
                    futures.append(await self._enqueue(entry.record))
        except Exception as exc:
            error = f"send failed: {exc!r}"
        if futures and not all(f.done() for f in futures):
            # aiokafka expires every future within its request timeout; the outer bound is a safety net
            await asyncio.wait(futures, timeout=self.cfg.send_timeout_s * 2 + 1)
        acked = 0
        for fut in futures:
            if not fut.done() or fut.cancelled() or fut.exception() is not None:
                if error is None:
                    error = "no acknowledgement" if not fut.done() else f"send failed: {fut.exception()!r}"
                break
            acked += 1
        if acked:
            self._commit(entries[:acked])
        if error is not None:
            self._away(error)
            # A fresh producer after any failure: an idempotent producer whose batches expired while the broker
            # was away has sequence numbers the broker will reject for ever (OutOfOrderSequenceNumber), and a
            # producer that cannot reach its broker spins on metadata. A new one gets a new producer id.
            await self._drop_producer()
            return False
        return True

    async def _drop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                await asyncio.wait_for(producer.stop(), 2.0)
            except Exception as exc:
                log.debug("discarded kafka producer did not stop cleanly", error=repr(exc))

    async def _enqueue(self, record: SpoolRecord) -> asyncio.Future:
        try:
            event = decode(record.value, record.headers, record.key)
        except InvalidEvent:
            # written by another version of the agent: send the bytes exactly as they were spooled
            fut = asyncio.get_running_loop().create_future()
            try:
                fut.set_result(await self._producer.send_raw(record.topic, record.value, record.key, record.headers))
            except Exception as exc:
                fut.set_exception(exc)
            return fut
        _, fut = await self._producer.enqueue(event, record.topic)  # type: ignore[union-attr]
        return fut

    def _commit(self, entries: list[SpoolEntry]) -> None:
        self.spool.commit(entries[-1])
        self.status.sent += len(entries)
        self.status.last_ack_monotonic = self._clock.monotonic()
        if self.status.kafka != "ok":
            log.info("kafka reachable: sending spooled events", pending=self.spool.pending)
        self.status.kafka = "ok"
        self.status.last_error = None
        if not self._first_sample.is_set() and any(e.record.topic == NODE_SAMPLES for e in entries):
            self._first_sample.set()
        self._committed.set()

    def _away(self, reason: str) -> None:
        if self.status.kafka != "away":
            log.warning("kafka unreachable: spooling events", spool=str(self.spool.dir), reason=reason)
        self.status.kafka = "away"
        self.status.last_error = reason
        self.status.failed_batches += 1
        self._committed.set()

    async def _pause(self) -> None:
        """Back off (doubling up to ``retry_max_s``), waking early when asked to stop."""
        delay, self._backoff = self._backoff, min(self._backoff * 2, self.cfg.retry_max_s)
        await sleep_or_wake(self._clock, delay, self._stopping)
