"""One judgement of what a command came to, for every status an agent or the coordinator records."""

from __future__ import annotations

import typing

import msgspec
import pytest

from events.payloads.commands import ACK_STATUSES, TERMINAL, CommandAck, CommandStatus, outcome


@pytest.mark.parametrize(
    ("status", "original", "expected"),
    [
        ("pending", None, None),
        ("accepted", None, None),
        ("done", None, "done"),
        ("failed", None, "failed"),
        ("rejected", None, "failed"),
        ("expired", None, "failed"),
        ("duplicate", "done", "done"),
        ("duplicate", "failed", "failed"),
        ("duplicate", None, "failed"),
    ],
)
def test_outcome(status: str, original: str | None, expected: str | None) -> None:
    assert outcome(status, original) == expected  # type: ignore[arg-type]


def test_every_finished_status_has_an_outcome_and_no_other_does() -> None:
    for status in typing.get_args(CommandStatus):
        assert (outcome(status) is not None) == (status in TERMINAL), status
    assert set(ACK_STATUSES) < set(typing.get_args(CommandStatus))


def test_an_ack_carries_the_original_outcome_over_the_wire() -> None:
    ack = CommandAck(command_id="c1", node_id="n1", epoch=1, status="duplicate", original="done")
    back = msgspec.json.decode(msgspec.json.encode(ack), type=CommandAck)
    assert back.original == "done" and back.outcome == "done"
    with pytest.raises(msgspec.ValidationError, match="original"):
        msgspec.json.decode(
            b'{"command_id":"c1","node_id":"n1","epoch":1,"status":"duplicate","original":"ok"}', type=CommandAck
        )
