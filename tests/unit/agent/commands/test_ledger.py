"""The command ledger: durable epoch and taken ids, replayed at open, torn tails dropped, bounded."""

from __future__ import annotations

import pytest

from myolo.agent.commands.ledger import INTERRUPTED, LEDGER_FILE, Ledger, LedgerError


def test_epoch_and_outcomes_survive_a_reopen(tmp_path) -> None:
    ledger = Ledger.open(tmp_path)
    assert ledger.epoch == 0 and ledger.get("a") is None
    assert ledger.raise_epoch(3) and not ledger.raise_epoch(2)
    ledger.begin("a", "set_interval", 3, now=10.0)
    ledger.finish("a", "done", None, {"interval_s": 2.0}, now=11.0)
    ledger.close()
    again = Ledger.open(tmp_path)
    assert again.epoch == 3
    entry = again.get("a")
    assert entry is not None
    assert (entry.status, entry.result, entry.accepted_at, entry.finished_at) == (
        "done",
        {"interval_s": 2.0},
        10.0,
        11.0,
    )


def test_a_command_taken_but_not_finished_is_failed_at_open_never_rerun(tmp_path) -> None:
    ledger = Ledger.open(tmp_path)
    ledger.begin("probe", "nccl_probe", 1, now=1.0)
    ledger.close()  # the agent died here
    entry = Ledger.open(tmp_path, now=50.0).get("probe")
    assert entry is not None and (entry.status, entry.reason, entry.finished_at) == ("failed", INTERRUPTED, 50.0)


def test_a_torn_last_line_is_dropped_and_the_file_rewritten(tmp_path) -> None:
    ledger = Ledger.open(tmp_path)
    ledger.begin("a", "report_sample", 2, now=1.0)
    ledger.close()
    path = tmp_path / LEDGER_FILE
    with open(path, "ab") as f:
        f.write(b'{"type":"cmd","command_id":"b","act')  # a crash in the middle of a write
    again = Ledger.open(tmp_path)
    assert again.get("a") is not None and again.get("b") is None and again.epoch == 2
    again.begin("c", "report_sample", 2, now=2.0)  # appends after a clean line, not after the torn one
    again.close()
    assert Ledger.open(tmp_path).get("c") is not None


def test_a_corrupt_line_in_the_middle_is_an_error_naming_the_file_and_line(tmp_path) -> None:
    (tmp_path / LEDGER_FILE).write_bytes(b'{"type":"epoch","epoch":1}\nnot json\n{"type":"epoch","epoch":2}\n')
    with pytest.raises(LedgerError, match=r"ledger.jsonl' line 2 is corrupt.*move the file away"):
        Ledger.open(tmp_path)


def test_the_remembered_ids_are_bounded_oldest_finished_first(tmp_path) -> None:
    ledger = Ledger.open(tmp_path, max_ids=3)
    ledger.begin("running", "nccl_probe", 1, now=0.0)
    for i in range(5):
        ledger.begin(f"c{i}", "report_sample", 1, now=float(i))
        ledger.finish(f"c{i}", "done", None, {}, now=float(i))
    assert len(ledger) == 3
    assert ledger.get("running") is not None  # a running command is never forgotten
    assert [ledger.get(f"c{i}") is not None for i in range(5)] == [False, False, False, True, True]
    ledger.close()
    again = Ledger.open(tmp_path, max_ids=3)
    assert len(again) == 3 and again.get("c4") is not None


def test_the_journal_is_compacted_as_it_grows(tmp_path) -> None:
    ledger = Ledger.open(tmp_path, max_ids=16, compact_after=60)
    for i in range(300):
        ledger.begin(f"c{i}", "report_sample", i // 10, now=float(i))
        ledger.finish(f"c{i}", "done", None, {"i": i}, now=float(i))
    ledger.close()
    lines = (tmp_path / LEDGER_FILE).read_bytes().count(b"\n")
    assert lines <= 61  # not 600: rewritten from its state along the way
    again = Ledger.open(tmp_path, max_ids=16)
    assert again.epoch == 29 and len(again) == 16 and again.get("c299").result == {"i": 299}


def test_taking_an_id_twice_is_a_bug_not_a_second_run(tmp_path) -> None:
    ledger = Ledger.open(tmp_path)
    ledger.begin("a", "report_sample", 1, now=0.0)
    with pytest.raises(LedgerError, match="already taken"):
        ledger.begin("a", "report_sample", 1, now=0.0)
