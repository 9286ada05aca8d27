"""``GET /metrics`` on the daemon's endpoint, on a simulated clock: dcgm-exporter's names and labels with the
values of the last sample, XIDs as a last-code gauge and a per-code counter, the agent's own metrics, and a
scrape that reads no GPU."""

from __future__ import annotations

import asyncio
import socket

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from myolo.agent.control import InjectRequest
from myolo.agent.daemon.main import handle_control, serve
from myolo.agent.metrics.plan import GPU_LABELS
from myolo.common.clock import SimClock
from tests.support.helpers import wait_until
from tests.unit.agent.daemon.test_main import FakeBroker, make_runtime, play, settle


def _families(text: str) -> dict[str, list]:
    """Samples by the name on the page, as prometheus_client's parser reads them (it spells every counter's
    samples with ``_total``; the TYPE line keeps the name as written)."""
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
            if s.name != fam.name:
                out.setdefault(fam.name, []).append(s)
    return out


async def _scrape(url: str) -> tuple[str, str]:
    async with aiohttp.ClientSession() as http, http.get(f"{url}/metrics") as resp:
        assert resp.status == 200
        return await resp.text(), resp.headers["Content-Type"]


async def test_metrics_show_the_last_sample_under_dcgm_exporters_names_and_labels(short_dir):
    clock, broker = SimClock(), FakeBroker()
    rt = make_runtime(short_dir, broker, clock, MYOLO_HEALTH_ENABLED="true", MYOLO_HEALTH_PORT="0")
    task = asyncio.create_task(serve(rt, install_signals=False))
    await wait_until(lambda: rt.health_url is not None, timeout=30, what="the endpoint listening")
    await settle()
    await play(clock, 5, 0.5)
    sample = rt.sampler.last_sample
    assert sample is not None and len(sample.gpus) == 4

    reads = 0
    read_all = rt.backend.read_all

    def counted():
        nonlocal reads
        reads += 1
        return read_all()

    rt.backend.read_all = counted  # type: ignore[method-assign]
    text, ctype = await _scrape(rt.health_url)
    assert reads == 0  # a scrape reads the last sample, never the GPUs
    assert ctype.startswith("text/plain; version=0.0.4")
    fams = _families(text)

    util = fams["DCGM_FI_DEV_GPU_UTIL"]
    assert len(util) == 4
    host = socket.gethostname()
    for s in util:
        g = sample.gpus[int(s.labels["gpu"])]
        assert tuple(s.labels) == GPU_LABELS  # dcgm-exporter's labels, in its order, and node
        assert s.labels["UUID"] == g.uuid and s.labels["modelName"] == g.name
        assert s.labels["pci_bus_id"] == g.pci_bus_id and s.labels["pci_bus_id"].startswith("00000000:")
        assert s.labels["device"] == f"nvidia{g.index}"
        assert s.labels["Hostname"] == host and s.labels["node"] == "node-a"
        assert s.value == g.util_gpu
    fb = {s.labels["gpu"]: s.value for s in fams["DCGM_FI_DEV_FB_USED"]}
    assert fb == {str(g.index): g.mem_used_bytes / 2**20 for g in sample.gpus}
    energy = {s.labels["gpu"]: s.value for s in fams["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]}
    assert energy == {str(g.index): g.energy_j * 1000 for g in sample.gpus}  # mJ, a counter with no _total
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter" in text
    tensor = {s.labels["gpu"]: s.value for s in fams["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"]}
    assert tensor == {str(g.index): g.prof_pipe_tensor_active for g in sample.gpus}
    assert {s.labels["err_code"] for s in fams["DCGM_FI_DEV_XID_ERRORS"]} == {"0"}  # none yet
    assert "myolo_gpu_xid_errors_total" not in fams
    assert "DCGM_FI_DEV_RETIRED_SBE" not in fams  # page retirement unsupported (Hopper remaps rows): absent

    assert [s.value for s in fams["myolo_events_sent_total"]] == [rt.publisher.status.sent]
    assert rt.publisher.status.sent > 0
    assert "\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=" in text  # on the page: no _total added
    assert [s.value for s in fams["myolo_kafka_up"]] == [1.0]
    assert [s.value for s in fams["myolo_spool_capacity_bytes"]] == [float(rt.cfg.spool.max_bytes)]
    lost = {s.labels["cause"]: s.value for s in fams["myolo_spool_lost_records_total"]}
    assert lost == {"over_cap": 0.0, "corrupt_frames": 0.0, "failed_writes": 0.0}
    assert {s.labels["phase"]: s.value for s in fams["myolo_workers"]}["running"] == 0.0
    assert fams["myolo_agent_sample_age_seconds"][0].value < 1.0

    # an XID on GPU 2, twice: the gauge holds the last code, the counter counts per code
    for _ in range(2):
        assert handle_control(rt, InjectRequest(gpu=2, xid=79)).ok
        await settle()
    await play(clock, 2, 0.5)
    fams = _families((await _scrape(rt.health_url))[0])
    last = {
        s.labels["gpu"]: (s.labels["err_code"], s.labels["err_msg"], s.value) for s in fams["DCGM_FI_DEV_XID_ERRORS"]
    }
    assert last["2"] == ("79", "fallen off the bus", 79.0)
    assert last["0"] == ("0", "No Error", 0.0)
    counts = [(s.labels["gpu"], s.labels["xid"], s.value) for s in fams["myolo_gpu_xid_errors_total"]]
    assert counts == [("2", "79", 2.0)]
    health = {(s.labels["gpu"], s.labels["state"]): s.value for s in fams["myolo_gpu_health"]}
    assert health[("2", "fail")] == 1.0 and health[("2", "ok")] == 0.0 and health[("0", "ok")] == 1.0

    rt.stop_event.set()
    assert await asyncio.wait_for(task, 30) == 0


async def test_metrics_can_be_turned_off_and_then_the_route_is_not_there(short_dir):
    clock, broker = SimClock(), FakeBroker()
    rt = make_runtime(
        short_dir, broker, clock, MYOLO_HEALTH_ENABLED="true", MYOLO_HEALTH_PORT="0", MYOLO_HEALTH_METRICS="false"
    )
    assert rt.metrics is None
    task = asyncio.create_task(serve(rt, install_signals=False))
    await wait_until(lambda: rt.health_url is not None, timeout=30, what="the endpoint listening")
    async with aiohttp.ClientSession() as http, http.get(f"{rt.health_url}/metrics") as resp:
        assert resp.status == 404
    rt.stop_event.set()
    assert await asyncio.wait_for(task, 30) == 0
