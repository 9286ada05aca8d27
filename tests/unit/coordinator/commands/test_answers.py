"""What the commands component tells other components of a command: a SentCommand read from its record."""

from __future__ import annotations

from myolo.coordinator.commands.answers import sent_command
from myolo.coordinator.commands.records import CommandIntent
from myolo.events.payloads.commands import RollbackArgs, SetIntervalResult


def record(**changes: object) -> CommandIntent:
    fields: dict = dict(command_id="c1", node_id="n1", action="rollback", epoch=3, created=1.0, attempts=2)
    fields.update(changes)
    return CommandIntent(**fields)


def test_the_answer_carries_what_callers_read_with_the_args_typed() -> None:
    args = {"component": "agent", "version": "1.2.0", "rollout": "r1"}
    answer = sent_command(record(args=args, status="duplicate", original="done", reason="seen", result={"a": 1}))
    assert answer.args == RollbackArgs(component="agent", version="1.2.0", rollout="r1")
    assert (answer.command_id, answer.node_id, answer.action) == ("c1", "n1", "rollback")
    assert (answer.status, answer.reason, answer.result, answer.original) == ("duplicate", "seen", {"a": 1}, "done")
    assert answer.terminal and answer.outcome == "done"
    assert not hasattr(answer, "epoch") and not hasattr(answer, "attempts")  # the record's bookkeeping stays


def test_a_pending_command_has_no_outcome_and_args_that_no_longer_read_answer_none() -> None:
    answer = sent_command(record(args={"version": 5}))
    assert answer.args is None
    assert not answer.terminal and answer.outcome is None


def test_the_typed_result_reads_as_the_actions_result_type() -> None:
    done = {"interval_s": 2.0, "previous_s": 10.0}
    answer = sent_command(record(action="set_interval", args={"interval_s": 2.0}, status="done", result=done))
    assert answer.typed_result() == SetIntervalResult(interval_s=2.0, previous_s=10.0)
    assert sent_command(record(action="set_interval", result={"interval_s": "x"})).typed_result() is None
