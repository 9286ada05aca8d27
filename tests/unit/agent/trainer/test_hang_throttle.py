"""The learned hang bound, the progress throttle and the log tail: plain logic, plain numbers."""

from __future__ import annotations

from pathlib import Path

from myolo.agent.trainer.hang import HangWatch
from myolo.agent.trainer.logtail import tail_lines
from myolo.agent.trainer.throttle import ProgressThrottle
from myolo.events.payloads import TrainingProgress


def watch(**kw: float) -> HangWatch:
    args = {"floor_s": 10.0, "factor": 5.0, "window": 4, "startup_s": 600.0, **kw}
    return HangWatch.start([0, 1], 0.0, **args)  # type: ignore[arg-type]


def test_before_two_steps_the_startup_allowance_applies() -> None:
    w = watch()
    assert w.bound_s() == 600.0
    assert w.check(599.0) == []
    hung = w.check(601.0)
    assert [h.rank for h in hung] == [0, 1] and hung[0].bound_s == 600.0


def test_the_bound_is_learned_from_the_slowest_recent_steps() -> None:
    w = watch()
    t = 0.0
    for step in range(1, 6):  # 4 s steps: bound 5 x 4 = 20 s
        t += 4.0
        w.heard(0, step, t)
        w.heard(1, step, t)
    assert w.step_time_s == 4.0 and w.bound_s() == 20.0
    t += 30.0  # one slow step (a checkpoint save): learned, the bound grows
    w.heard(0, 6, t)
    w.heard(1, 6, t)
    assert w.bound_s() == 150.0
    for step in range(7, 12):  # it leaves the window of 4 after 4 more steps
        t += 4.0
        w.heard(0, step, t)
        w.heard(1, step, t)
    assert w.bound_s() == 20.0
    w.heard(1, None, t + 19.0)  # a heartbeat without a step still counts as alive
    hung = w.check(t + 21.0)
    assert [(h.rank, h.last_step) for h in hung] == [(0, 11)]
    assert hung[0].silent_s == 21.0


def test_fast_steps_never_go_below_the_floor() -> None:
    w = watch(floor_s=10.0)
    for step in range(1, 10):
        w.heard(0, step, step * 0.01)
    assert w.bound_s() == 10.0


def test_an_exited_rank_is_not_watched() -> None:
    w = watch()
    w.forget(1)
    assert [h.rank for h in w.check(1000.0)] == [0]


def record(step: int, job: str = "j", generation: int = 0) -> TrainingProgress:
    return TrainingProgress(
        job_id=job, generation=generation, rank=0, world_size=1, step=step, loss=1.0, tokens_per_s=1.0, step_time_s=1.0
    )


def test_throttle_one_per_interval_per_job_newest_step_wins() -> None:
    t = ProgressThrottle(1.0)
    assert t.offer(record(1), 0.0) == record(1)
    assert t.offer(record(2), 0.2) is None
    assert t.offer(record(3), 0.4) is None
    assert t.offer(record(1, job="other"), 0.5) == record(1, job="other")  # jobs are apart
    assert t.due("j", 0.9) is None
    assert t.due("j", 1.0) == record(3)
    assert t.offer(record(4), 1.1) is None
    assert t.flush("j") == record(4)  # the job ended: the last step goes out whatever the interval
    assert t.flush("j") is None
    assert t.dropped == 1


def test_throttle_keeps_the_newest_when_records_arrive_out_of_order() -> None:
    t = ProgressThrottle(10.0)
    t.offer(record(1), 0.0)
    t.offer(record(5), 1.0)
    t.offer(record(4), 2.0)
    assert t.flush("j") == record(5)


def test_log_tail_reads_the_end_only(tmp_path: Path) -> None:
    log = tmp_path / "rank-0.log"
    log.write_text("".join(f"line {i}\n" for i in range(100_000)) + "\n\nTraceback\nRuntimeError: boom\n")
    assert tail_lines(log, 3) == ["line 99999", "Traceback", "RuntimeError: boom"]
    assert tail_lines(log, 0) == []
    assert tail_lines(tmp_path / "missing.log", 5) == []
    log.write_bytes(b"x" * 5000 + b"\n\xff\xfe bad utf8\n")
    assert tail_lines(log, 5, max_bytes=100) == ["\ufffd\ufffd bad utf8"]
