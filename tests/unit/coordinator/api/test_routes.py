"""The coordinator's HTTP API against an in-memory fleet: reads, writes on the leader, 307 from a standby."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestClient, TestServer

from myolo.coordinator.cordons.routes import MAX_REASON
from tests.support.api_auth import OPERATOR, bearer
from tests.support.coordinator.api_fleet import MemoryFleet, app_for, node, sick_node


async def _client(fleet: MemoryFleet) -> TestClient:
    client = TestClient(TestServer(app_for(fleet)), headers=bearer(OPERATOR))
    await client.start_server()
    return client


@pytest.fixture
async def fleet() -> MemoryFleet:
    fleet = MemoryFleet()
    now = fleet.now()
    fleet.add(node("node-b", now, gpus=4))
    fleet.add(node("node-a", now))
    fleet.add(sick_node("node-c", now))
    return fleet


@pytest.fixture
async def client(fleet: MemoryFleet) -> AsyncIterator[TestClient]:
    client = await _client(fleet)
    yield client
    await client.close()


async def test_list_nodes_is_sorted_with_computed_facts(client: TestClient, fleet: MemoryFleet) -> None:
    resp = await client.get("/v1/nodes")
    assert resp.status == 200
    assert resp.headers["X-Myolo-Coordinator"] == "coord-a"
    body = await resp.json()
    assert body["now"] == fleet.now()
    assert [n["node_id"] for n in body["items"]] == ["node-a", "node-b", "node-c"]
    a, b, c = body["items"]
    assert (a["gpu_count"], b["gpu_count"]) == (2, 4)
    assert a["last_seen_age_s"] == 0.5
    assert a["schedulable"] is True and a["cordoned"] is False and a["cordon"] is None
    assert c["health"] == "fail" and c["cordoned"] is True and c["schedulable"] is False
    assert c["cordon"]["by"] == "auto:fault"
    assert (c["recent_faults_count"], c["nccl_count"], c["leaks_count"]) == (1, 1, 1)
    assert "recent_faults" not in c  # the list view counts them; the node view has them
    assert [g["health"] for g in c["gpus"]] == ["ok", "fail"]


async def test_get_node_has_faults_nccl_and_leaks(client: TestClient) -> None:
    resp = await client.get("/v1/nodes/node-c")
    assert resp.status == 200
    body = await resp.json()
    assert body["recent_faults"][0]["xid"] == 79
    assert body["nccl"][0]["transports"] == ["P2P/NVLink", "NET/IB/GDRDMA"]
    assert body["leaks"][0]["slope_pct_per_h"] == 0.42 and body["leaks"][0]["alert"] is True
    assert body["gpus"][0]["health"] == "ok"  # filled in, though the wire format omits defaults
    assert body["gpus"][1]["health_reasons"] == ["XID 79"]


async def test_unknown_node_is_a_json_404(client: TestClient) -> None:
    resp = await client.get("/v1/nodes/nope")
    assert resp.status == 404
    body = await resp.json()
    assert body["field"] == "id" and "'nope' is not known" in body["error"] and "GET /v1/nodes" in body["hint"]


async def test_gpus_lists_every_gpu_with_its_node_state(client: TestClient) -> None:
    body = await (await client.get("/v1/gpus")).json()
    rows = body["items"]
    assert len(rows) == 2 + 4 + 2
    assert [(r["node_id"], r["index"]) for r in rows[:3]] == [("node-a", 0), ("node-a", 1), ("node-b", 0)]
    failed = [r for r in rows if r["health"] == "fail"]
    assert [(r["node_id"], r["index"], r["node_cordoned"]) for r in failed] == [("node-c", 1, True)]
    assert rows[0]["node_liveness"] == "Ready" and rows[0]["mem_total_bytes"] == 80 << 30


async def test_leader_and_healthz(client: TestClient, fleet: MemoryFleet) -> None:
    leader = await (await client.get("/v1/leader")).json()
    assert leader == {
        "leader_id": "coord-a",
        "epoch": 3,
        "api_url": "http://127.0.0.1:1",
        "instance_id": "coord-a",
        "is_leader": True,
    }
    health = await client.get("/healthz")
    assert health.status == 200
    assert await health.json() == {
        "status": "ok",
        "instance_id": "coord-a",
        "role": "leader",
        "group_generation": 4,
        "term_generation": 4,
        "nodes": 3,
    }
    fleet.started.clear()
    fleet.is_leader = False
    starting = await client.get("/healthz")
    assert starting.status == 503
    assert (await starting.json())["status"] == "starting" and (await starting.json())["role"] == "standby"


async def test_cordon_and_uncordon_on_the_leader(client: TestClient, fleet: MemoryFleet) -> None:
    resp = await client.post("/v1/nodes/node-a/cordon", json={"reason": "bad fan"})
    assert resp.status == 200
    body = await resp.json()
    assert body["node_id"] == "node-a"
    assert body["cordon"] == {
        "node_id": "node-a",
        "cordoned": True,
        "reason": "bad fan",
        "by": f"operator:{OPERATOR}",  # the caller's token
        "time": fleet.now(),
        "epoch": 3,
        "silent_since": None,
    }
    listed = await (await client.get("/v1/nodes/node-a")).json()
    assert listed["cordoned"] is True and listed["schedulable"] is False

    resp = await client.post(
        "/v1/nodes/node-a/uncordon", headers={"Content-Type": "application/json"}
    )  # empty: defaults
    assert resp.status == 200
    assert [(w.cordoned, w.reason, w.by) for w in fleet.writes] == [
        (True, "bad fan", f"operator:{OPERATOR}"),
        (False, "uncordoned by operator", f"operator:{OPERATOR}"),
    ]
    assert (await (await client.get("/v1/nodes/node-a")).json())["schedulable"] is True


async def test_cordon_of_an_unknown_node_is_404(client: TestClient, fleet: MemoryFleet) -> None:
    resp = await client.post("/v1/nodes/ghost/cordon", json={"reason": "x"})
    assert resp.status == 404
    assert (await resp.json())["field"] == "id"
    assert fleet.writes == []


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (b"{not json", None, "not JSON"),
        (b'{"reason": 5}', "reason", "Expected `str`"),
        (b'{"reason": "x", "force": true}', "force", "unknown field"),
        (('{"reason": "' + "x" * (MAX_REASON + 1) + '"}').encode(), "reason", "length"),
        (b'{"by": "bob"}', "by", "by is not accepted"),  # who writes is the token's name, nobody else's
        (b"[1, 2]", None, "Expected `object`"),
    ],
)
async def test_bad_bodies_are_400_naming_the_field(
    client: TestClient, fleet: MemoryFleet, body: bytes, field: str | None, words: str
) -> None:
    resp = await client.post("/v1/nodes/node-a/cordon", data=body, headers={"Content-Type": "application/json"})
    assert resp.status == 400
    answer = await resp.json()
    assert answer.get("field") == field
    assert words in answer["error"]
    assert answer["hint"]
    assert fleet.writes == []


async def test_standby_redirects_writes_to_the_leader_and_the_client_follows(fleet: MemoryFleet) -> None:
    leader = await _client(fleet)
    standby_fleet = MemoryFleet("coord-b", leader=False, leader_url=str(leader.make_url("/")).rstrip("/"))
    standby_fleet.add(node("node-a", standby_fleet.now()))
    standby = await _client(standby_fleet)
    try:
        resp = await standby.post("/v1/nodes/node-a/cordon?x=1", json={"reason": "r"}, allow_redirects=False)
        assert resp.status == 307
        assert resp.headers["Location"] == f"{standby_fleet.leader_url}/v1/nodes/node-a/cordon?x=1"
        assert (await resp.json())["hint"] == resp.headers["Location"]
        # reads are served by the standby itself
        assert (await standby.get("/v1/nodes/node-a")).headers["X-Myolo-Coordinator"] == "coord-b"

        # the client repeats it at Location (aiohttp drops the token on a redirect to another origin: myoloctl
        # keeps it, see coordinator/cli/client.py)
        redirected = await standby.post(
            "/v1/nodes/node-a/cordon", json={"reason": "via standby"}, allow_redirects=False
        )
        followed = await leader.session.post(redirected.headers["Location"], json={"reason": "via standby"})
        assert followed.status == 200
        assert followed.headers["X-Myolo-Coordinator"] == "coord-a"
        assert [w.reason for w in fleet.writes] == ["via standby"]
        assert standby_fleet.writes == []
    finally:
        await standby.close()
        await leader.close()


async def test_standby_without_a_known_leader_answers_503() -> None:
    fleet = MemoryFleet("coord-b", leader=False, leader_url=None)
    fleet.add(node("node-a", fleet.now()))
    client = await _client(fleet)
    try:
        leader = await (await client.get("/v1/leader")).json()
        assert leader == {
            "leader_id": None,
            "epoch": None,
            "api_url": None,
            "instance_id": "coord-b",
            "is_leader": False,
        }
        resp = await client.post("/v1/nodes/node-a/uncordon", json={})
        assert resp.status == 503
        assert resp.headers["Retry-After"] == "1"
        assert "no leader" in (await resp.json())["error"]
    finally:
        await client.close()


async def test_framework_errors_are_json(client: TestClient) -> None:
    missing = await client.get("/v2/everything")
    assert missing.status == 404
    assert "GET /v2/everything" in (await missing.json())["error"]
    wrong = await client.delete("/v1/nodes")
    assert wrong.status == 405
    assert "GET" in wrong.headers["Allow"]
    assert "/openapi.json" in (await wrong.json())["hint"]


async def test_a_failing_service_is_a_json_500(client: TestClient, fleet: MemoryFleet) -> None:
    def broken() -> list:
        raise RuntimeError("view is gone")

    fleet.nodes = broken  # type: ignore[method-assign]
    resp = await client.get("/v1/nodes")
    assert resp.status == 500
    assert (await resp.json())["error"] == "internal error: RuntimeError: view is gone"
