"""The agent's side of a release trial: it commits only once it works, and reports a release it came back from.

The real ``serve`` on a simulated clock with a fake broker and commands from memory; the notification socket is
recorded as the launcher would read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from myolo.agent.launcher import state as trial
from myolo.events.payloads import FailedRelease, NodeFault, NodeSample
from tests.unit.agent.daemon.test_commands import MemorySource, Node
from tests.unit.agent.daemon.test_main import play

pytestmark = pytest.mark.usefixtures("stop_nodes")


def recorded(n: Node) -> list[dict]:
    sent: list[dict] = []

    def notify(**fields: str | int) -> bool:
        sent.append({k.upper(): str(v) for k, v in fields.items()})
        return True

    n.rt.notifier.notify = notify  # type: ignore[method-assign]
    n.rt.notifier.ready = lambda status=None: notify(READY=1)  # type: ignore[method-assign]
    return sent


def commits(sent: list[dict]) -> int:
    return sum(1 for f in sent if f.get(trial.COMMIT_FIELD) == "1")


async def test_the_release_commits_once_ready_a_sample_is_in_kafka_and_commands_reach_it(
    short_dir, monkeypatch
) -> None:
    joined = {"yes": False}
    monkeypatch.setattr(MemorySource, "joined", lambda self: joined["yes"] and not self.stopped)
    releases = short_dir / "releases"
    state = trial.TrialState(committed="4.0.0", trial="4.1.0", tries=1)
    trial.save(releases / "agent" / trial.TRIAL_FILE, state)
    n = Node(short_dir, toml=f"[releases]\ndir = '{releases}'\n")
    sent = recorded(n)
    n.broker.up = False
    await n.start()
    await play(n.clock, 10, 0.5)
    assert any(f.get("READY") == "1" for f in sent)  # READY with Kafka away (spooling)...
    assert commits(sent) == 0  # ...but no commit: nothing reached Kafka yet
    n.broker.up = True
    await play(n.clock, 10, 0.5)
    assert commits(sent) == 0  # samples in Kafka, but its command consumer has not joined
    samples = [e.data for _, e in n.broker.events if isinstance(e.data, NodeSample)]
    assert samples and all(s.agent_on_trial == "4.1.0" for s in samples)  # the coordinator waits for it
    joined["yes"] = True
    await play(n.clock, 3, 0.5)
    assert commits(sent) == 1
    assert [e.data for _, e in n.broker.events if isinstance(e.data, NodeSample)][-1].agent_on_trial is None
    await play(n.clock, 10, 0.5)
    assert commits(sent) == 1  # once
    assert await n.stop() == 0


async def test_a_release_the_launcher_restored_is_in_every_sample_and_its_fault_published_once(
    short_dir, monkeypatch
) -> None:
    releases = short_dir / "releases"
    failed = FailedRelease(
        component="agent", version="4.0.9", restored="4.0.0", tries=3, error="RuntimeError: broken", at=5.0
    )
    trial.save(releases / "agent" / trial.TRIAL_FILE, trial.TrialState(committed="4.0.0", failed=failed))
    monkeypatch.setenv(trial.REPORT_ENV, "1")
    n = Node(short_dir, toml=f"[releases]\ndir = '{releases}'\n")
    await n.start()
    await play(n.clock, 5, 0.5)
    samples = [e.data for _, e in n.broker.events if isinstance(e.data, NodeSample)]
    assert samples and all(s.failed_releases == [failed] for s in samples)
    faults = [e.data for _, e in n.broker.events if isinstance(e.data, NodeFault) and e.data.kind == "release"]
    assert len(faults) == 1
    (fault,) = faults
    assert fault.health == "warn" and fault.message == "RuntimeError: broken"
    assert fault.reasons == ["agent 4.0.9 never committed itself in 3 start(s); switched back to 4.0.0"]
    assert await n.stop() == 0

    monkeypatch.delenv(trial.REPORT_ENV)  # a later start: the samples still say so, no second fault
    again = Node(_fresh(short_dir), toml=f"[releases]\ndir = '{releases}'\n")
    await again.start()
    await play(again.clock, 3, 0.5)
    samples = [e.data for _, e in again.broker.events if isinstance(e.data, NodeSample)]
    assert samples and samples[-1].failed_releases == [failed]
    assert not [e for _, e in again.broker.events if isinstance(e.data, NodeFault) and e.data.kind == "release"]
    assert await again.stop() == 0


def _fresh(d: Path) -> Path:
    other = d / "again"
    other.mkdir()
    return other


START = {
    "job_id": "j1",
    "generation": 0,
    "node_rank": 0,
    "nnodes": 1,
    "gpus": [0],
    "master_addr": "127.0.0.1",
    "master_port": 29500,
}


async def test_a_trainer_release_that_cannot_answer_its_job_check_is_taken_back_by_its_upgrade(
    short_dir,
) -> None:
    from myolo.agent.releases.store import ReleaseStore
    from tests.support.agent.wheels import build_wheel, sha256_of
    from tests.unit.agent.daemon.test_releases import final

    releases = short_dir / "releases"
    n = Node(short_dir, toml=f"[releases]\ndir = '{releases}'\n")
    broken = build_wheel(
        short_dir / "dist", "8.0", name="brokentrainer", files={"myolo/__init__.py": "raise RuntimeError('bad')\n"}
    )
    good = build_wheel(short_dir / "dist", "8.1")
    await n.start()
    await play(n.clock, 2, 0.5)
    up = {"component": "trainer", "artifact": str(broken), "sha256": sha256_of(broken)}
    await n.send("t0", "upgrade", version="8.0", **up)  # its probe job check cannot run: failed, taken back
    ack = await final(n, "t0")
    assert ack.status == "failed", ack
    assert (
        "the trainer release 8.0 on trial is taken back (now the base install): fix the release and upgrade again"
        in (ack.reason or "")
    )
    assert "RuntimeError: bad" in (ack.reason or "")
    store = releases / "trainer"
    assert not (store / "current").exists()  # the base install again
    await play(n.clock, 2, 0.5)
    sample = [e.data for _, e in n.broker.events if isinstance(e.data, NodeSample)][-1]
    (failed,) = sample.failed_releases
    assert (failed.component, failed.version, failed.restored, failed.tries) == ("trainer", "8.0", None, 1)
    (fault,) = [e.data for _, e in n.broker.events if isinstance(e.data, NodeFault) and e.data.kind == "release"]
    assert fault.reasons == [
        "trainer 8.0 never committed itself in 1 start(s) (the last: its job check could not run); "
        "switched back to the base install"
    ]

    # a trial still open (the agent stopped during the probe) ends at the next start_workers, the same way
    ReleaseStore(releases, "trainer").switch("8.0")
    trial.save(store / trial.TRIAL_FILE, trial.TrialState(committed=None, trial="8.0", tries=1))
    await n.send("s0", "start_workers", **START)
    ack = await final(n, "s0")
    assert ack.status == "rejected", ack
    assert "the trainer release 8.0 on trial is taken back (now the base install): send the command again" in (
        ack.reason or ""
    )
    assert not (store / "current").exists()

    # a good release commits at its upgrade's probe; a job it refuses later is only that: a verdict
    await n.send("t1", "upgrade", version="8.1", component="trainer", artifact=str(good), sha256=sha256_of(good))
    assert (await final(n, "t1")).status == "done"
    assert trial.load(store / trial.TRIAL_FILE) == trial.TrialState(committed="8.1")
    await n.send("s1", "start_workers", **START, job={"model": "no-such-model"})
    ack = await final(n, "s1")
    assert ack.status == "rejected" and "taken back" not in (ack.reason or "") and "model" in (ack.reason or "")
    assert (store / "current").readlink() == Path("8.1")
    assert trial.load(store / trial.TRIAL_FILE) == trial.TrialState(committed="8.1")
    await play(n.clock, 2, 0.5)
    assert [e.data for _, e in n.broker.events if isinstance(e.data, NodeSample)][-1].failed_releases == []
    assert await n.stop() == 0
