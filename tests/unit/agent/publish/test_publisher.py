"""The publisher and a spool that loses records: every loss goes out as a WARN ``spool`` fault event, and
no read error ends the sender. Time is simulated; the broker is an in-memory stand-in that acknowledges."""

from __future__ import annotations

import asyncio
import errno
import os

from myolo.agent.publish import Publisher
from myolo.agent.spool import Spool
from myolo.common.clock import SimClock
from myolo.events.codec import decode
from myolo.events.envelope import Event
from myolo.events.payloads import NodeFault, NodeSample
from tests.support.agent.spoolkit import KIB, flip, frames_on_disk

NODE = "node-a"


class Broker:
    """Acknowledges every record at once and keeps the events."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def factory(self):
        broker = self

        class Producer:
            async def start(self) -> None: ...

            async def stop(self) -> None: ...

            async def enqueue(self, event: Event, topic: str | None = None):
                broker.events.append(event)
                fut = asyncio.get_running_loop().create_future()
                fut.set_result(None)
                return event, fut

            async def send_raw(self, *a):  # pragma: no cover - only for undecodable records
                raise AssertionError("not expected")

        return Producer

    def sample_seqs(self) -> list[int]:
        return [e.data.seq for e in self.events if isinstance(e.data, NodeSample)]

    def spool_faults(self) -> list[NodeFault]:
        return [e.data for e in self.events if isinstance(e.data, NodeFault) and e.data.kind == "spool"]


def publisher(tmp_path, broker: Broker, clock: SimClock, **spool_kw) -> Publisher:
    args = {"max_bytes": 1024 * KIB, "segment_bytes": 16 * KIB, "fsync": "never", **spool_kw}
    return Publisher(
        Spool(tmp_path / "spool", clock=clock, **args),
        broker.factory(),
        source=f"/myolo/agent/{NODE}",
        node_id=NODE,
        clock=clock,
    )


def sample(i: int) -> NodeSample:
    return NodeSample(node_id=NODE, backend="sim", gpus=[], seq=i)


def spooled(pub: Publisher) -> list[Event]:
    return [decode(e.record.value, e.record.headers, e.record.key) for e in pub.spool.peek(100_000)]


async def send_all(pub: Publisher, clock: SimClock) -> None:
    task = asyncio.create_task(pub.run())
    for _ in range(100):
        await clock.advance(1.0, settle=50)
        if pub.spool.pending == 0:
            break
    assert not task.done(), "the sender ended"
    await pub.close(flush_timeout_s=1.0)
    await task


async def test_a_damaged_frame_on_disk_costs_one_event_and_is_reported_as_a_fault(tmp_path):
    clock, broker = SimClock(), Broker()
    first = publisher(tmp_path, broker, clock)
    for i in range(300):
        first.publish(sample(i))
    assert first.spool.dropped == 0
    first.spool.close()
    path, frame = frames_on_disk(tmp_path / "spool")[150]
    lost = decode(frame.record.value, frame.record.headers, frame.record.key).data.seq
    flip(path, frame.start + 30)

    again = publisher(tmp_path, broker, clock)
    await send_all(again, clock)
    assert broker.sample_seqs() == [i for i in range(300) if i != lost]
    [fault] = broker.spool_faults()
    assert (fault.node_id, fault.health) == (NODE, "warn")
    assert fault.reasons == ["1 record lost to damaged spool frames (disk corruption or a lost file)"]
    assert fault.message == "spool lost 1 event (1 since the agent started)"
    assert again.status.loss_faults == 1


async def test_records_dropped_by_the_cap_are_reported_as_a_fault_in_the_spool(tmp_path):
    clock, broker = SimClock(), Broker()
    pub = publisher(tmp_path, broker, clock, max_bytes=16 * KIB, segment_bytes=4 * KIB)
    i = 0
    while pub.spool.over_cap == 0:  # Kafka is away: nothing is sent, the spool fills up
        pub.publish(sample(i))
        i += 1
    last = spooled(pub)[-1].data
    assert isinstance(last, NodeFault) and (last.kind, last.health) == ("spool", "warn")
    assert last.reasons == [
        f"{pub.spool.over_cap} unsent records dropped: the spool reached its cap of {16 * KIB} bytes while Kafka "
        "was away"
    ]
    assert pub.status.loss_faults == 1


async def test_events_the_disk_refused_are_counted_and_reported_once_it_takes_writes_again(tmp_path, monkeypatch):
    clock, broker = SimClock(), Broker()
    pub = publisher(tmp_path, broker, clock)
    pub.publish(sample(0))

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    for i in range(1, 4):
        pub.publish(sample(i))
    assert pub.status.spool_error is not None and "No space left" in pub.status.spool_error
    assert (pub.spool.failed_writes, pub.status.loss_faults) == (3, 0)  # no fault while it cannot be written
    monkeypatch.undo()
    pub.publish(sample(4))
    assert pub.status.spool_error is None
    events = spooled(pub)
    assert [e.data.seq for e in events if isinstance(e.data, NodeSample)] == [0, 4]
    [fault] = [e.data for e in events if isinstance(e.data, NodeFault)]
    assert fault.reasons == ["3 events the spool could not write (disk full or I/O error)"]


async def test_a_read_error_never_ends_the_sender(tmp_path, monkeypatch):
    clock, broker = SimClock(), Broker()
    pub = publisher(tmp_path, broker, clock)
    for i in range(20):
        pub.publish(sample(i))
    real = os.pread

    def broken(fd, n, offset):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "pread", broken)
    task = asyncio.create_task(pub.run())
    await clock.advance(3.0, settle=50)
    assert not task.done()
    assert pub.status.spool_error is not None and "Input/output error" in pub.status.spool_error
    assert broker.sample_seqs() == []
    monkeypatch.setattr(os, "pread", real)
    for _ in range(20):
        await clock.advance(1.0, settle=50)
    assert broker.sample_seqs() == list(range(20))
    assert pub.status.spool_error is None and pub.spool.pending == 0
    await pub.close(flush_timeout_s=1.0)
    await task
