"""The dashboard in a real browser (headless Chromium through Selenium) on the local stack: a real broker, two
coordinators, three agents with one simulated GPU each and real trainer workers (gloo on the CPU).

One stack, one story: a viewer logs in through the form; every page draws with no console error and shows
what the API shows (the node count, the job's step); markup in a job's label and a model's description is
shown as text; the standby serves the dashboard from its replayed state; the session cannot write; XID 79 on
node-2 turns its GPU red on the open fleet page and the shrink appears in the open job page's timeline,
without a reload. Screenshots of every page go to tests/artifacts/ui/.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from myolo.coordinator.api import tokens
from myolo.coordinator.cli.auth import stack_token
from myolo.coordinator.localstack import stack
from myolo.coordinator.localstack.broker import LocalBroker, state
from myolo.coordinator.localstack.health import coordinator_health
from tests.support.helpers import pids_mentioning
from tests.support.ui import (
    browser_fetch,
    chrome,
    console_errors,
    gpu_colour,
    loads,
    login,
    open_page,
    shot,
    text_of,
    until,
)

REPO = Path(__file__).resolve().parents[3]
HOSTILE = "<img src=x onerror=alert(1)>"
RED = (0xD6, 0x27, 0x28)
MANIFEST = """\
apiVersion: myolo.ai/v1
kind: ElasticJob
metadata: {{name: tiny, labels: {{team: "{label}"}}}}
spec:
  minReplicas: 1
  maxReplicas: 3
  replica: {{tp: 1, pp: 1}}
  trainer: {{model: {{name: tiny}}, optimizer: {{steps: 3000}}, data: {{globalBatch: 12, seqLen: 64}}, runtime: {{seed: 0}}, checkpoint: {{every: 20, snapshotEvery: 1}}}}
  checkpointDir: {ckpt}
"""
PAGES = ("fleet", "node?key=node-2", "jobs", "job?key=tiny", "rollouts", "drift", "registry", "events")


def _call(
    url: str, token: str, method: str, path: str, body: bytes | None = None, ctype: str = "application/json"
) -> tuple[int, Any]:
    headers = {"Content-Type": ctype, "Authorization": f"Bearer {token}"}
    req = urllib.request.Request(f"{url}{path}", data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _running(url: str, token: str, replicas: int) -> dict | None:
    status, job = _call(url, token, "GET", "/v1/jobs/tiny")
    gen = job.get("generation") if status == 200 else None
    ok = (
        gen is not None
        and job["phase"] == "Running"
        and gen["replicas"] == replicas
        and gen["resumed_from"] is not None
        and job["progress"]["step"] >= gen["resumed_from"] + 3
    )
    return job if ok else None


def _is_red(rgb: list[int] | None) -> bool:
    return rgb is not None and all(abs(a - b) <= 8 for a, b in zip(rgb, RED, strict=True))


def _no_markup_ran(driver) -> None:
    """Markup in the data stayed text: no element was made of it, and no dialog opened."""
    assert driver.find_elements(By.CSS_SELECTOR, "main img") == []
    assert driver.execute_script("return document.querySelectorAll('[onerror]').length") == 0
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018


@pytest.mark.kafka
def test_the_dashboard_in_a_browser_shows_the_api_live_and_never_writes(tmp_path: Path) -> None:
    broker = LocalBroker(tmp_path, tied_to_parent=True)
    driver = None
    try:
        broker.start(timeout=120)
        stack.start_members(tmp_path, coordinators=2, nodes=3, gpus=1, timeout=120, progress=lambda _: None)
        records = {p.name: p for p in state.load(tmp_path).processes}
        coords = {n: r.info["api_url"] for n, r in records.items() if r.role == "coordinator"}
        admin = stack_token(tmp_path)
        stack.wait_fleet(list(coords.values()), ["node-1", "node-2", "node-3"], 90, admin)
        leader = until(
            "a leader", lambda: next((u for u in coords.values() if coordinator_health(u) == "leader"), None), 60
        )
        standby = next(u for u in coords.values() if u != leader)
        viewer = tokens.add(tokens.local_paths(tmp_path)[0], "vic", "viewer")

        # markup where users type text: a model's description and a job's label
        assert _call(leader, admin, "PUT", "/v1/models/demo", json.dumps({"description": HOSTILE}).encode())[0] in (
            200,
            201,
        )
        job = MANIFEST.format(label=HOSTILE, ckpt=tmp_path / "ckpt").encode()
        status, body = _call(leader, admin, "POST", "/v1/jobs", job, "application/yaml")
        assert status == 201, body
        until("3 replicas training", lambda: _running(leader, admin, 3), 180)

        driver = chrome()
        login(driver, leader, viewer)
        for page in PAGES:
            open_page(driver, leader, f"/ui/{page}")
            assert console_errors(driver) == [], page
            shot(driver, page.split("?")[0])

        # what the API shows: the node count, the job's step (read before and after the page)
        nodes = _call(leader, admin, "GET", "/v1/nodes")[1]["items"]
        open_page(driver, leader, "/ui/fleet")
        assert text_of(driver, "#stat-nodes .value") == str(len(nodes)) == "3"
        assert text_of(driver, "#stat-gpus .value") == "3" and text_of(driver, "#stat-allocated .value") == "3"
        before = _call(leader, admin, "GET", "/v1/jobs/tiny")[1]["progress"]["step"]
        open_page(driver, leader, "/ui/job?key=tiny")
        shown = int(driver.execute_script(
            "return [...document.querySelectorAll('.job-facts tr')].find(r => r.cells[0].textContent === 'step').cells[1].textContent"
        ))  # fmt: skip
        after = _call(leader, admin, "GET", "/v1/jobs/tiny")[1]["progress"]["step"]
        assert before <= shown <= after + 1, (before, shown, after)

        # markup shown as text, never run
        assert f"team={HOSTILE}" in text_of(driver, ".job-facts")
        _no_markup_ran(driver)
        open_page(driver, leader, "/ui/registry")
        assert HOSTILE in text_of(driver, "main")
        _no_markup_ran(driver)

        # the session cannot write: not the API's writes, not its reads, and nothing changed
        assert browser_fetch(driver, "POST", "/v1/nodes/node-1/cordon", '{"reason": "from the browser"}') == 401
        assert browser_fetch(driver, "POST", "/v1/jobs", "{}") == 401
        assert browser_fetch(driver, "GET", "/v1/nodes") == 401
        assert browser_fetch(driver, "POST", "/ui/api/pages/fleet", "{}") in (401, 405)
        assert _call(leader, admin, "GET", "/v1/nodes/node-1")[1]["cordon"] is None
        refused = console_errors(driver)  # the browser logs each refusal: those, and nothing else
        assert refused and all(" 401 " in e["message"] or " 405 " in e["message"] for e in refused), refused

        # the standby serves it too, from its replayed state
        other = chrome()
        try:
            login(other, standby, viewer)
            open_page(other, standby, "/ui/job?key=tiny")
            assert "Running" in text_of(other, ".job-facts")
            open_page(other, standby, "/ui/fleet")
            assert text_of(other, "#stat-nodes .value") == "3"
            assert console_errors(other) == []
            shot(other, "fleet-standby")
        finally:
            other.quit()

        # XID 79 on node-2: its GPU turns red on the open fleet page, the shrink shows in the open job page
        open_page(driver, leader, "/ui/fleet")
        fleet_tab = driver.current_window_handle
        until("node-2 on the map", lambda: gpu_colour(driver, "node-2", 0) is not None)
        assert not _is_red(gpu_colour(driver, "node-2", 0))
        driver.switch_to.new_window("tab")
        open_page(driver, leader, "/ui/job?key=tiny")
        job_tab = driver.current_window_handle
        for tab in (fleet_tab, job_tab):
            driver.switch_to.window(tab)
            driver.execute_script("window.__kept = 'no reload'")
        drawn = {tab: _loads_in(driver, tab) for tab in (fleet_tab, job_tab)}
        subprocess.run(
            [
                sys.executable,
                "-m",
                "myolo.agent",
                "inject",
                "--socket",
                records["node-2"].info["socket"],
                "--gpu",
                "0",
                "--xid",
                "79",
            ],
            cwd=REPO,
            check=True,
            capture_output=True,
        )

        def red() -> bool:
            driver.switch_to.window(fleet_tab)
            return _is_red(gpu_colour(driver, "node-2", 0)) and "node-2" in text_of(driver, "table.unhealthy")

        until("node-2's GPU drawn red", red, 30)
        shot(driver, "fleet-xid79")

        def shrunk() -> bool:
            driver.switch_to.window(job_tab)
            return "shrink" in text_of(driver, "table.timeline")

        until("the shrink in the job's timeline", shrunk, 120)
        shot(driver, "job-shrink")
        for tab in (fleet_tab, job_tab):
            driver.switch_to.window(tab)
            assert driver.execute_script("return window.__kept") == "no reload"
            assert loads(driver) > drawn[tab]  # drawn again from the live feed, in the same page
            assert console_errors(driver) == []
    finally:
        if driver is not None:
            driver.quit()
        stack.stop_members(tmp_path, progress=lambda _: None)
        broker.stop()
        for pid in pids_mentioning(str(tmp_path)):
            os.kill(pid, signal.SIGKILL)
        broker.clean()


def _loads_in(driver, tab: str) -> int:
    driver.switch_to.window(tab)
    return loads(driver)
