"""The trial record's decisions: a new release is tried ``max_tries`` times, then the committed one comes back."""

from __future__ import annotations

from pathlib import Path

from myolo.agent.launcher import state as trial
from myolo.agent.launcher.state import TrialState


def test_the_first_start_trusts_what_runs() -> None:
    start = trial.next_start(None, "4.0.0", 3, now=10.0)
    assert start == trial.Start(state=TrialState(committed="4.0.0"))
    assert not start.state.on_trial


def test_a_new_release_is_tried_max_tries_times_then_the_committed_one_is_restored() -> None:
    state = TrialState(committed="4.0.0")
    for n in (1, 2, 3):
        start = trial.next_start(state, "4.0.9", 3, now=100.0 + n)
        assert not start.restore and start.state.trial == "4.0.9" and start.state.tries == n
        state = trial.failed_start(start.state, "exited with code 1", f"Traceback ... try {n}")
    start = trial.next_start(state, "4.0.9", 3, now=200.0)
    assert start.restore
    assert start.state.committed == "4.0.0" and not start.state.on_trial
    failed = start.state.failed
    assert failed is not None
    assert (failed.component, failed.version, failed.restored, failed.tries, failed.at) == (
        "agent",
        "4.0.9",
        "4.0.0",
        3,
        200.0,
    )
    assert failed.reason == "exited with code 1" and failed.error.endswith("try 3")
    # the restored release runs off trial, and the failure stays on record for the samples
    after = trial.next_start(start.state, "4.0.0", 3, now=201.0)
    assert not after.restore and not after.state.on_trial and after.state.failed == failed


def test_a_commit_ends_the_trial_and_clears_an_older_failure() -> None:
    old = trial.next_start(TrialState(committed="4.0.0"), "4.0.9", 1, now=1.0)
    restored = trial.next_start(trial.failed_start(old.state, "boom"), "4.0.9", 1, now=2.0)
    assert restored.restore and restored.state.failed is not None
    start = trial.next_start(restored.state, "4.1.0", 3, now=3.0)
    assert start.state.failed is not None  # kept while 4.1.0 is on trial
    done = trial.committed(start.state, "4.1.0")
    assert done == TrialState(committed="4.1.0")
    assert trial.committed(done, "4.2.0") == done  # not on trial: a commit changes nothing


def test_another_release_switched_in_mid_trial_starts_its_own_count() -> None:
    state = trial.next_start(TrialState(committed="a"), "b", 3, now=1.0).state
    state = trial.next_start(trial.failed_start(state, "x"), "b", 3, now=2.0).state
    assert state.tries == 2
    state = trial.next_start(state, "c", 3, now=3.0).state
    assert (state.trial, state.tries, state.last_error) == ("c", 1, "")


def test_the_base_install_can_be_the_committed_release() -> None:
    state = trial.next_start(TrialState(committed=None), "4.0.9", 1, now=1.0).state
    start = trial.next_start(trial.failed_start(state, "x"), "4.0.9", 1, now=2.0)
    assert start.restore and start.state.committed is None
    assert start.state.failed is not None and start.state.failed.restored is None


def test_the_record_survives_a_round_trip_and_a_damaged_one_reads_as_none(tmp_path: Path) -> None:
    path = tmp_path / "agent" / trial.TRIAL_FILE
    assert trial.load(path) is None
    state = TrialState(committed="4.0.0", trial="4.0.9", tries=2, last_error="boom")
    trial.save(path, state)
    assert trial.load(path) == state
    path.write_bytes(b'{"committed": ')
    assert trial.load(path) is None
    path.write_bytes(b"x" * (trial.MAX_RECORD_BYTES + 10))
    assert trial.load(path) is None
    path.write_bytes(b'{"committed": "a", "tries": "many"}')
    assert trial.load(path) is None
