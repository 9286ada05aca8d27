"""State records survive the trip through Kafka bytes; damaged ones are refused with a reason; epochs only grow."""

from __future__ import annotations

import msgspec
import pytest

from myolo.coordinator.commands.records import CommandIntent
from myolo.coordinator.cordons.records import CordonRecord
from myolo.coordinator.core.leadership import LeaderTerm, next_epoch
from myolo.coordinator.state import BadStateRecord, StateCodec

CODEC = StateCodec({"cordon": CordonRecord, "command": CommandIntent, "term": LeaderTerm})
encode_state, decode_state = CODEC.encode, CODEC.decode


@pytest.mark.parametrize(
    "record",
    [
        CordonRecord(node_id="n1", cordoned=True, reason="XID 79", by="auto:fault", time=1.5, epoch=3),
        CommandIntent(command_id="ab", node_id="n1", action="report_sample", epoch=2, created=1.0, attempts=1),
        LeaderTerm(epoch=4, instance_id="c1", api_url="http://c1:8480", started=2.0, generation=9),
    ],
)
def test_roundtrip(record) -> None:
    value, headers = encode_state(record)
    assert decode_state(value, headers) == record


def test_damaged_records_are_refused_with_the_reason() -> None:
    value, _ = encode_state(LeaderTerm(epoch=1, instance_id="c", started=0.0))
    with pytest.raises(BadStateRecord, match="no myolo-state-kind header"):
        decode_state(value, [])
    with pytest.raises(BadStateRecord, match="unknown state kind 'job'"):
        decode_state(value, [("myolo-state-kind", b"job")])
    with pytest.raises(BadStateRecord, match="cordon record does not decode"):
        decode_state(value, [("myolo-state-kind", b"cordon")])
    with pytest.raises(TypeError, match="not a state record kind"):
        encode_state(object())  # type: ignore[arg-type]
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(BadStateRecord):
        decode_state(deep, [("myolo-state-kind", b"command")])
    with pytest.raises(BadStateRecord, match="no myolo-state-kind header"):
        decode_state(value, [("myolo-state-kind", None)])  # type: ignore[list-item]


def test_one_struct_is_one_kind() -> None:
    with pytest.raises(ValueError, match="one state kind only"):
        StateCodec({"a": LeaderTerm, "b": LeaderTerm})


def test_intent_terminal_states() -> None:
    i = CommandIntent(command_id="a", node_id="n", action="report_sample", epoch=1, created=0.0)
    assert not i.terminal
    for status in ("done", "rejected", "failed", "duplicate", "expired"):
        assert msgspec.structs.replace(i, status=status).terminal


def test_epochs_strictly_increase() -> None:
    assert next_epoch(None, -1) == 1
    assert next_epoch(None, 5) == 5
    term = LeaderTerm(epoch=7, instance_id="c", started=0.0)
    assert next_epoch(term, 3) == 8  # the group was recreated (generation reset): the record wins
    assert next_epoch(term, 12) == 12
