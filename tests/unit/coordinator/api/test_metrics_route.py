"""``GET /metrics`` on the coordinator's API: a scrape token reads it and nothing else, a viewer reads it too,
no token gets 401; requests are counted by route pattern, method, status and role."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from myolo.coordinator.api.app import create_app
from myolo.coordinator.api.requests import RequestCounts
from tests.support.api_auth import SCRAPER, VIEWER, bearer, security
from tests.support.coordinator.api_fleet import MemoryFleet, node, parts_for


@pytest.fixture
def counts() -> RequestCounts:
    return RequestCounts()


@pytest.fixture
async def client(counts: RequestCounts) -> AsyncIterator[TestClient]:
    fleet = MemoryFleet()
    fleet.add(node("node-a", fleet.now()))
    fleet.add(node("node-b", fleet.now(), liveness="Lost"))
    app = create_app(fleet, parts_for(fleet), security(None, fleet.clock, fleet.instance_id), counts)
    client = TestClient(TestServer(app))
    await client.start_server()
    yield client
    await client.close()


async def test_a_scrape_token_reads_the_metrics_and_nothing_else(client: TestClient) -> None:
    resp = await client.get("/metrics", headers=bearer(SCRAPER))
    assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = [s for f in text_string_to_metric_families(await resp.text()) for s in f.samples]
    nodes = {(s.labels["liveness"], s.labels["health"]): s.value for s in samples if s.name == "myolo_nodes"}
    assert nodes[("Ready", "ok")] == 1 and nodes[("Lost", "ok")] == 1 and nodes[("Suspect", "fail")] == 0
    assert {s.labels["member"] for s in samples} == {"coord-a"}
    refused = await client.get("/v1/nodes", headers=bearer(SCRAPER))
    assert refused.status == 403 and "needs the viewer role" in (await refused.json())["error"]
    assert (await client.get("/metrics", headers=bearer(VIEWER))).status == 200
    assert (await client.get("/metrics")).status == 401


async def test_requests_are_counted_by_route_pattern_method_status_and_role(
    client: TestClient, counts: RequestCounts
) -> None:
    await client.get("/v1/nodes/node-a", headers=bearer(VIEWER))
    await client.get("/v1/nodes/node-b", headers=bearer(VIEWER))
    await client.get("/v1/nodes/nope", headers=bearer(VIEWER))
    await client.get("/v1/nodes", headers=bearer(SCRAPER))
    await client.get("/v1/nodes")
    await client.get("/no/such/path", headers=bearer(VIEWER))
    assert counts.counts[("/v1/nodes/{node_id}", "GET", "200", "viewer")] == 2  # the pattern, never the raw path
    assert counts.counts[("/v1/nodes/{node_id}", "GET", "404", "viewer")] == 1
    assert counts.counts[("/v1/nodes", "GET", "403", "scrape")] == 1
    assert counts.counts[("/v1/nodes", "GET", "401", "none")] == 1
    assert counts.counts[("unmatched", "GET", "404", "viewer")] == 1
