"""Every page in headless Chromium with rich data and no broker: the real coordinator's components fed state
records (a rollout with its gates, drift evaluations, registry versions with lineage and an alias history, a
job) and events (samples over time, an XID), its API served on a local port. Each page draws without a console
error, shows the figures it was given, and keeps the markup it was given as text."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
from aiohttp import web
from selenium.webdriver.common.by import By

from myolo.common.clock import SystemClock
from myolo.coordinator.api.app import SHUTDOWN_GRACE_S, create_app
from myolo.coordinator.core.coordinator import Coordinator
from myolo.coordinator.drift.records import STATE_DRIFT, StatusRecord
from myolo.coordinator.registry.records import (
    STATE_REGISTRY,
    AliasChange,
    AliasRecord,
    IndexDataset,
    IndexMetric,
    IndexResult,
    IndexTask,
    ModelIndex,
    ModelRecord,
    VersionRecord,
)
from myolo.coordinator.rollouts.records import STATE_ROLLOUTS, Change, RolloutRecord, RolloutSpec, RolloutStatus, Wave
from myolo.events.bus import RecordInfo
from myolo.events.envelope import new_event
from myolo.events.payloads import GpuReading, NodeFault, NodeSample
from myolo.events.payloads.models import FeatureDrift, GateResult
from tests.support.api_auth import VIEWER, security, shared
from tests.support.coordinator.memory_jobs import running_job
from tests.support.coordinator.offline import offline_coordinator
from tests.support.ui import chrome, console_errors, login, open_page, shot, text_of, until

HOSTILE = "<img src=x onerror=alert(1)>"
INFO = RecordInfo("t", 0, 0)


def _feed(coord: Coordinator, now: float) -> None:
    """State records as the tail hands them over."""
    spec = RolloutSpec(component="agent", version="4.1.0", artifact="/srv/a.whl", sha256="a" * 64, by="operator:ada")
    gate = GateResult(gate="throughput", passed=True, detail=HOSTILE, figures={"ratio": 0.97})
    waves = [
        Wave(index=0, percent=34, nodes=["n1"], step="passed", gates=[gate]),
        Wave(index=1, percent=100, nodes=["n2", "n3"], step="baking", bake_until=now + 90),
    ]
    history = [Change(time=now - 60, phase="Progressing", wave=0, reason="started", by="operator:ada")]
    status = RolloutStatus(updated=now, phase="Progressing", wave=1, waves=waves, history=history)
    coord.apply_state(
        STATE_ROLLOUTS, "r1", RolloutRecord(name="r1", created=now - 60, spec=spec, status=status), "rollout"
    )
    for i, psi in enumerate((0.02, 0.31)):
        feats = [
            FeatureDrift(feature="length", kind="numeric", count=500, psi=psi, ks=0.1 + i, drifted=bool(i), by=["ks"] if i else []),
            FeatureDrift(feature=HOSTILE, kind="categorical", count=500, psi=0.01, js=0.05),
        ]  # fmt: skip
        rec = StatusRecord(
            model="demo", version="2", evaluated_at=now - 60 + i * 30, window_start=now - 120 + i * 30,
            window_end=now - 60 + i * 30, share=0.5 * i, drifted=bool(i), consecutive=i, features=feats,
            detections=["det-1"] if i else [],
        )  # fmt: skip
        coord.apply_state(STATE_DRIFT, f"status/demo/2/{i}", rec, "status")
    evaluation = ModelIndex(
        name="demo",
        results=[
            IndexResult(
                task=IndexTask(type="text-generation"),
                dataset=IndexDataset(type="held-out", name="wiki"),
                metrics=[IndexMetric(type="perplexity", value=2.36)],
            )
        ],
    )
    records = [
        ModelRecord(name="demo", description=HOSTILE, created=now - 300, updated=now - 300, by="operator:ada"),
        VersionRecord(model="demo", version=1, created=now - 200, by="auto", source="external", artifact="/m/1", sha256="1" * 64),
        VersionRecord(
            model="demo", version=2, created=now - 100, by="auto", source="job", artifact="/m/2", sha256="2" * 64,
            job="tiny", generation=3, parent=1, model_index=[evaluation],
        ),
        AliasRecord(
            model="demo", alias="champion", version=2,
            history=[AliasChange(version=1, by="operator:ada", when=now - 150, reason="first"),
                     AliasChange(version=2, previous=1, by="auto", when=now - 90, reason=HOSTILE)],
        ),
    ]  # fmt: skip
    for r in records:
        coord.apply_state(STATE_REGISTRY, "k", r, type(r).__name__)
    job = running_job(now, name="tiny")
    job = msgspec.structs.replace(job, spec=msgspec.structs.replace(job.spec, job=msgspec.structs.replace(job.spec.job, labels={"team": HOSTILE})))  # fmt: skip
    coord.apply_state("myolo.state.jobs", "tiny", job, "job")


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Coordinator, str]]:
    coord = offline_coordinator(tmp_path, clock=SystemClock(), MYOLO_UI_HISTORY_STEP_S="0.01")
    app = create_app(coord, [p for p in (c.api() for c in coord.peers) if p is not None], security())
    runner = web.AppRunner(app, shutdown_timeout=SHUTDOWN_GRACE_S)  # the feed's stream is cut, as the API's
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield coord, f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def test_every_page_draws_rich_data_as_text(served) -> None:
    coord, url = served
    now = coord.clock.now()
    _feed(coord, now)
    fault = NodeFault(node_id="node-a", kind="xid", health="fail", xid=79, gpu_index=1, reasons=[HOSTILE])
    for k in range(5):  # samples over time: the node's curves get points
        if k == 4:
            await coord.router(new_event(fault, "/a", clock=coord.clock), INFO)
        sick = k == 4  # the last sample comes after XID 79 on GPU 1, which it reports failed, as an agent does
        gpus = [
            GpuReading(index=i, uuid=f"G{i}", name="H100", util_gpu=20.0 * k + i, temp_gpu_c=50.0 + k,
                       health="fail" if sick and i == 1 else "ok")
            for i in range(2)
        ]  # fmt: skip
        await coord.router(
            new_event(NodeSample(node_id="node-a", backend="sim", gpus=gpus, seq=k), "/a", clock=coord.clock), INFO
        )
        await asyncio.sleep(0.02)

    expected = {
        "rollouts": ["r1: agent 4.1.0 (Progressing)", "throughput: passed", "ratio=0.970", HOSTILE],
        "drift": ["demo version 2", "det-1", HOSTILE],
        "registry": [HOSTILE, "v1", "v2", "tiny g3", "wiki perplexity=2.3600", "@champion"],
        "jobs": ["tiny", f"team={HOSTILE}"],
        "job?key=tiny": ["shrink", f"team={HOSTILE}"],
        "node?key=node-a": ["XID", "79", HOSTILE, "The last hour"],
        "events": ["fault", "XID 79 on GPU 1", "rollout", "drift", "registration", "alias"],
        "fleet": ["XID 1", "node-a", "fail", "79"],
    }

    def browse() -> None:
        driver = chrome()
        try:
            login(driver, url, shared()[1][VIEWER])
            for page, texts in expected.items():
                open_page(driver, url, f"/ui/{page}")
                main = text_of(driver, "main")
                for text in texts:
                    assert text in main, (page, text)
                assert driver.find_elements(By.CSS_SELECTOR, "main img") == [], page
                assert console_errors(driver) == [], page
                shot(driver, "offline-" + page.split("?")[0])
            # the bake counts down in the page between reloads
            open_page(driver, url, "/ui/rollouts")
            left = int(text_of(driver, ".countdown").split()[0])
            assert 80 <= left <= 90
            until("the bake counting down", lambda: int(text_of(driver, ".countdown").split()[0]) < left, 5)
            # the node's four charts are drawn from its ring: the five samples, in the session's own fetch
            open_page(driver, url, "/ui/node?key=node-a")
            assert driver.execute_script("return document.querySelectorAll('canvas.chart').length") == 4
            times = "return fetch('/ui/api/pages/node-history?key=node-a').then((r) => r.json()).then((h) => h.times.length)"
            assert driver.execute_script(times) == 5
        finally:
            driver.quit()

    await asyncio.to_thread(browse)
