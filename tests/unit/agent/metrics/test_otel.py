"""The same metrics as OpenTelemetry instruments: the hw.* conventions with their units and attributes, read
by an in-memory reader, and pushed over OTLP/HTTP to a receiver that decodes the protobuf."""

from __future__ import annotations

import asyncio

from aiohttp import web
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from myolo.agent.control import InjectRequest
from myolo.agent.daemon.main import handle_control, serve
from myolo.agent.metrics.exporter import AgentMetrics
from myolo.agent.metrics.otel import register
from myolo.common.clock import SimClock
from tests.unit.agent.daemon.test_main import FakeBroker, make_runtime, play, settle


def _points(reader: InMemoryMetricReader) -> dict[str, list]:
    data = reader.get_metrics_data()
    out: dict[str, list] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out.setdefault(m.name, []).extend((m.unit, dict(p.attributes), p.value) for p in m.data.data_points)
    return out


async def test_instruments_follow_the_hw_conventions_with_converted_units(short_dir):
    clock, broker = SimClock(), FakeBroker()
    rt = make_runtime(short_dir, broker, clock)
    assert rt.metrics is None  # neither the endpoint nor telemetry is on in this runtime: no metrics
    metrics = AgentMetrics(rt.publisher, clock, lambda: rt.sampler.last_sample, lambda: rt.sampler.last_read_monotonic)
    reader = InMemoryMetricReader()
    names = register(metrics, MeterProvider(metric_readers=[reader]).get_meter("t"))
    assert {"hw.gpu.utilization", "hw.gpu.memory.usage", "hw.gpu.memory.limit", "hw.power", "hw.energy"} <= set(names)
    assert {"hw.temperature", "hw.errors", "hw.status"} <= set(names)
    task = asyncio.create_task(serve(rt, install_signals=False))
    await settle()
    await play(clock, 4, 0.5)
    assert handle_control(rt, InjectRequest(gpu=1, xid=48)).ok  # double-bit ECC: the GPU fails, still answers
    await settle()
    await play(clock, 2, 0.5)
    sample = rt.sampler.last_sample
    assert sample is not None
    pts = _points(reader)

    util = [(a["hw.gpu.task"], a["hw.id"], v) for u, a, v in pts["hw.gpu.utilization"] if u == "1"]
    assert len(util) == 12  # general, encoder, decoder on 4 GPUs
    general = {gid: v for task_, gid, v in util if task_ == "general"}
    assert general == {g.uuid: g.util_gpu / 100 for g in sample.gpus}
    used = {a["myolo.gpu.index"]: (u, v) for u, a, v in pts["hw.gpu.memory.usage"]}
    assert used == {str(g.index): ("By", g.mem_used_bytes) for g in sample.gpus}
    energy = {a["hw.id"]: (u, v) for u, a, v in pts["hw.energy"]}
    assert energy == {g.uuid: ("J", g.energy_j) for g in sample.gpus}
    attrs = pts["hw.power"][0][1]
    assert attrs["hw.type"] == "gpu" and attrs["hw.vendor"] == "NVIDIA" and attrs["hw.model"] == sample.gpus[0].name
    assert attrs["myolo.node.id"] == "node-a" and attrs["myolo.gpu.pci_bus_id"].startswith("00000000:")
    temps = {(a["myolo.gpu.index"], a["hw.sensor_location"]) for u, a, _ in pts["hw.temperature"] if u == "Cel"}
    assert ("0", "gpu") in temps and ("0", "memory") in temps
    xids = [
        (a["error.type"], a["myolo.gpu.xid"], a["myolo.gpu.index"], v)
        for _, a, v in pts["hw.errors"]
        if a.get("error.type") == "xid"
    ]
    assert xids == [("xid", "48", "1", 1)]
    status = {(a["myolo.gpu.index"], a["hw.state"]): v for _, a, v in pts["hw.status"] if a["hw.type"] == "gpu"}
    assert status[("1", "failed")] == 1 and status[("1", "ok")] == 0 and status[("0", "ok")] == 1
    rt.stop_event.set()
    assert await asyncio.wait_for(task, 30) == 0


async def test_telemetry_otlp_pushes_the_hw_metrics_to_a_collector_over_http(short_dir):
    got: list[ExportMetricsServiceRequest] = []

    async def receive(request: web.Request) -> web.Response:
        msg = ExportMetricsServiceRequest()
        msg.ParseFromString(await request.read())
        got.append(msg)
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/metrics", receive)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        clock, broker = SimClock(), FakeBroker()
        env = {"MYOLO_TELEMETRY_EXPORTER": "otlp", "MYOLO_TELEMETRY_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}
        rt = make_runtime(short_dir, broker, clock, **env)
        task = asyncio.create_task(serve(rt, install_signals=False))
        await settle()
        await play(clock, 3, 0.5)
        rt.stop_event.set()  # the shutdown makes the last export: no waiting on the export interval
        assert await asyncio.wait_for(task, 30) == 0
    finally:
        await runner.cleanup()
    assert got, "no OTLP request reached the collector"
    rm = got[-1].resource_metrics[0]
    resource = {a.key: a.value.string_value for a in rm.resource.attributes}
    assert resource["service.name"] == "myolo-agent" and resource["service.instance.id"] == "node-a"
    names = {m.name: m.unit for sm in rm.scope_metrics for m in sm.metrics}
    assert names["hw.gpu.utilization"] == "1" and names["hw.gpu.memory.usage"] == "By"
    assert names["hw.energy"] == "J" and names["myolo.spool.pending"] == "{record}"
