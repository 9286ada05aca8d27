"""The launcher blames the rank with the cause, not the survivor that noticed its peer die first."""

from __future__ import annotations

import collections

from myolo.kernels.cli.launch import Worker, cause


def worker(rank: int, exit_time: float, *lines: str) -> Worker:
    return Worker(rank=rank, proc=None, tail=collections.deque(lines), exit_time=exit_time)  # type: ignore[arg-type]


def test_a_survivor_that_exited_first_is_not_blamed() -> None:
    survivor = worker(0, 1.0, "RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer")
    crashed = worker(1, 1.2, "RuntimeError: injected fault at step 3")
    assert cause([survivor, crashed]) is crashed


def test_earliest_own_error_wins_and_collateral_only_falls_back_to_the_earliest() -> None:
    a, b = worker(2, 2.0, "ValueError: boom"), worker(3, 1.5, "KeyError: x")
    assert cause([a, b]) is b
    c, d = worker(0, 3.0, "Connection reset by peer"), worker(1, 2.5, "Broken pipe")
    assert cause([c, d]) is d
    assert cause([]) is None
