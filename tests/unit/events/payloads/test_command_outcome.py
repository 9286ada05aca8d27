"""One judgement of what a command came to, for every status an agent or the coordinator records."""

from __future__ import annotations

import typing

import msgspec
import pytest

from myolo.events.payloads.commands import ACK_STATUSES, TERMINAL, CommandAck, CommandStatus, outcome


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


def test_every_action_has_one_result_type_that_reads_what_it_writes() -> None:
    from myolo.events.payloads.commands import (
        ACTION_ARGS,
        ACTION_RESULTS,
        InvalidEvent,
        StopWorkersResult,
        UpgradeResult,
        action_result,
    )

    assert set(ACTION_RESULTS) == set(ACTION_ARGS)
    up = UpgradeResult(
        component="agent",
        version="4.1",
        previous=None,
        path="/r/4.1",
        sha256="ab" * 32,
        installed=True,
        pruned=[],
        restart="exec",
    )
    wire = msgspec.json.decode(msgspec.json.encode(up))
    assert wire["previous"] is None and wire["pruned"] == []  # required fields travel even when empty
    assert action_result("upgrade", wire) == up
    drained = action_result(
        "drain", {"draining": True, "stopped": [{"job_id": "j", "generation": 1, "stopped": False}]}
    )
    assert drained.stopped == [StopWorkersResult(job_id="j", generation=1, stopped=False)]
    with pytest.raises(InvalidEvent) as exc:
        action_result(
            "start_workers", {"job_id": "j", "generation": 1, "pids": {"0": "x"}, "world_size": 1, "warm_ranks": []}
        )
    assert exc.value.field == "result.pids[...]" and "Expected `int`" in exc.value.reason
    with pytest.raises(InvalidEvent, match="not an action"):
        action_result("reboot", {})
