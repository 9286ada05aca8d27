"""The chaos test's and the soak's count of lost samples finds the losses it claims to find."""

from __future__ import annotations

from tests.support.evidence import Samples, sample_gaps


def test_each_agent_start_is_a_run_and_a_gap_inside_one_is_a_loss() -> None:
    assert sample_gaps({"a": [1, 2, 3, 1, 2], "b": [1, 2]}) == Samples(total=7, lost=0, duplicates=0, runs=3)
    assert sample_gaps({"a": [1, 2, 5, 6]}) == Samples(total=4, lost=2, duplicates=0, runs=1)


def test_a_resent_sample_is_a_duplicate_not_a_loss_nor_a_new_run() -> None:
    assert sample_gaps({"a": [1, 2, 3, 2, 3, 4]}) == Samples(total=6, lost=0, duplicates=2, runs=1)
    assert sample_gaps({}) == Samples(total=0, lost=0, duplicates=0, runs=0)
