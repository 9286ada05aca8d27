"""The health checks' rules, and the HTTP endpoint answering GET /healthz and POST /healthcheck."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import pytest

from myolo.agent.endpoint import ActiveCheck, HealthServer
from myolo.agent.endpoint.checks import check_gpus, check_kafka, check_nvml, check_spool, report
from myolo.agent.spool import SpoolStats
from myolo.common.clock import SimClock


def stats(**kw) -> SpoolStats:
    base = dict(
        pending_records=0,
        bytes=0,
        max_bytes=1000,
        segments=1,
        appended=0,
        committed=0,
        dropped=0,
        last_seq=0,
        acked_seq=0,
    )
    return SpoolStats(**{**base, **kw})


def test_worst_check_wins_and_kafka_away_is_only_warn():
    ok = {
        "nvml": check_nvml("sim", 8, None, 0.5, 1.0),
        "kafka": check_kafka("ok", None, 0.2, 0),
        "spool": check_spool(stats(), None, 0.8),
        "gpus": check_gpus("ok", [], {0: "ok"}),
    }
    assert report("n", "sim", "v", ok).status == "ok"
    away = {**ok, "kafka": check_kafka("away", "connection refused", 60.0, 120)}
    assert report("n", "sim", "v", away).status == "warn"
    assert "connection refused" in away["kafka"].detail
    failed = {**away, "gpus": check_gpus("fail", ["gpu 3: xid 79 (fallen off the bus)"], {3: "fail"})}
    rep = report("n", "sim", "v", failed)
    assert rep.status == "fail" and "xid 79" in rep.checks["gpus"].detail


def test_spool_rules():
    assert check_spool(stats(bytes=900), None, 0.8).status == "warn"
    assert check_spool(stats(), "cannot write the spool: No space left on device", 0.8).status == "fail"
    assert check_spool(stats(), "cannot read the spool: Input/output error", 0.8).status == "fail"


def test_every_spool_loss_degrades_the_spool_check_and_says_why():
    lost = check_spool(stats(dropped=4, over_cap=2, corrupt_frames=1, failed_writes=1), None, 0.8)
    assert lost.status == "warn"
    assert lost.detail == "4 events lost since start (2 over cap, 1 corrupt, 1 failed writes)"
    assert lost.data["corrupt_frames"] == 1 and lost.data["dropped"] == 4
    only_corrupt = check_spool(stats(dropped=1, corrupt_frames=1), None, 0.8)
    assert (only_corrupt.status, only_corrupt.detail) == ("warn", "1 events lost since start (1 corrupt)")


def test_a_cursor_that_cannot_be_written_degrades_and_start_up_notes_stay_ok():
    cur = check_spool(stats(cursor_error="cannot write the spool cursor: Read-only file system"), None, 0.8)
    assert cur.status == "warn" and "sent again" in cur.detail
    noted = check_spool(stats(pending_records=5, torn_tails=1, cursor_resets=1), None, 0.8)
    assert noted.status == "ok"  # no event was lost: a write cut short by a crash, duplicates to come
    assert "cut short" in noted.detail and "not trusted" in noted.detail
    assert (noted.data["torn_tails"], noted.data["cursor_resets"]) == (1, 1)


def test_the_status_line_names_every_kind_of_loss():
    assert stats(pending_records=3).summary() == "3 pending, 0 dropped"
    assert stats(dropped=3, over_cap=1, corrupt_frames=2).summary() == "0 pending, 3 dropped (1 over cap, 2 corrupt)"


def test_nvml_rules():
    assert check_nvml("nvml", 8, "NVMLError_DriverNotLoaded", None, 1.0).status == "fail"
    assert check_nvml("nvml", 8, None, None, 1.0).status == "warn"  # no reading yet
    assert check_nvml("nvml", 8, None, 30.0, 1.0).status == "fail"  # reads stopped: a stuck driver


async def test_http_endpoint_get_and_post():
    state = {"gpus": "ok"}
    posts = []

    def current():
        checks = {
            "nvml": check_nvml("sim", 2, None, 0.1, 1.0),
            "kafka": check_kafka("ok", None, 0.1, 0),
            "spool": check_spool(stats(), None, 0.8),
            "gpus": check_gpus(state["gpus"], [] if state["gpus"] == "ok" else ["gpu 0: bad"], {0: state["gpus"]}),
        }
        return report("node-a", "sim", "4.0", checks)

    async def active():
        posts.append(1)
        return current()

    server = HealthServer(current, ActiveCheck(active, current, SimClock(), 0.0), host="127.0.0.1", port=0)
    await server.start()

    def fetch(method: str):
        path = "/healthz" if method == "GET" else "/healthcheck"
        req = urllib.request.Request(
            f"http://127.0.0.1:{server.port}{path}", method=method, data=b"" if method == "POST" else None
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    try:
        code, body = await asyncio.to_thread(fetch, "GET")
        assert code == 200 and body["status"] == "ok" and body["node_id"] == "node-a"
        assert set(body["checks"]) == {"nvml", "kafka", "spool", "gpus"}
        code, body = await asyncio.to_thread(fetch, "POST")
        assert code == 200 and posts == [1]
        state["gpus"] = "fail"
        code, body = await asyncio.to_thread(fetch, "POST")
        assert code == 503 and body["status"] == "fail" and body["checks"]["gpus"]["detail"] == "gpu 0: bad"
    finally:
        await server.stop()


async def test_a_busy_port_is_a_clear_error():
    first = HealthServer(lambda: None, None, host="127.0.0.1", port=0)  # type: ignore[arg-type]
    await first.start()
    second = HealthServer(lambda: None, None, host="127.0.0.1", port=first.port)  # type: ignore[arg-type]
    try:
        try:
            await second.start()
        except OSError as exc:
            assert "health.port" in str(exc)
        else:
            raise AssertionError("a second server bound the same port")
    finally:
        await first.stop()
        await second.stop()


@pytest.mark.parametrize(
    ("host", "advertise", "url"),
    [
        ("127.0.0.1", "10.0.0.5", "http://127.0.0.1:8080"),  # a specific interface is its own address
        ("0.0.0.0", "10.0.0.5", "http://10.0.0.5:8080"),
        ("::", "fd00::5", "http://[fd00::5]:8080"),
        ("0.0.0.0", None, "http://0.0.0.0:8080"),
    ],
)
def test_the_url_names_the_advertised_address_when_listening_on_every_interface(host, advertise, url):
    server = HealthServer(lambda: None, None, host=host, port=8080, advertise=advertise)  # type: ignore[arg-type]
    assert server.url == url
