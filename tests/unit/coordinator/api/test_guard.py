"""The API's gate over an in-memory fleet: 401/403 with what to do, roles per route, admin-only routes, writes
only as JSON, and every write audited (before it runs: no record, no write)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from myolo.coordinator.api.app import create_app
from myolo.coordinator.api.auth import Authenticator, caller
from myolo.coordinator.core.component import RouteSet
from tests.support.api_auth import ADMIN, OPERATOR, VIEWER, MemoryAudit, bearer, security
from tests.support.coordinator.api_fleet import MemoryFleet, node, parts_for

JSON = {"Content-Type": "application/json"}


def toy_part() -> RouteSet:
    """A component with an admin-only write and a read, whose routes answer who called."""

    async def who(request: web.Request) -> web.Response:
        me = caller(request)
        return web.json_response({"name": me.name, "role": me.role})

    routes = [web.put("/v1/toys/{toy}/key", who), web.get("/v1/toys/{toy}/key", who), web.get("/v1/toys", who)]
    return RouteSet(routes, admin_routes=(("PUT", "/v1/toys/{toy}/key"), ("GET", "/v1/toys/{toy}/key")))


@pytest.fixture
def fleet() -> MemoryFleet:
    fleet = MemoryFleet()
    fleet.add(node("node-a", fleet.now()))
    return fleet


@pytest.fixture
def audit() -> MemoryAudit:
    return MemoryAudit()


@pytest.fixture
async def client(fleet: MemoryFleet, audit: MemoryAudit) -> AsyncIterator[TestClient]:
    app = create_app(fleet, [*parts_for(fleet), toy_part()], security(audit, fleet.clock, fleet.instance_id))
    client = TestClient(TestServer(app))
    await client.start_server()
    yield client
    await client.close()


async def test_no_token_or_a_bad_one_is_401_with_a_bearer_challenge(client: TestClient, audit: MemoryAudit) -> None:
    for headers, invalid in [
        ({}, False),
        ({"Authorization": "Bearer myolo_nope"}, True),
        ({"Authorization": "Basic YWxpY2U6cHc="}, True),
        ({"Authorization": "Bearer " + "x" * 300}, True),
    ]:
        resp = await client.get("/v1/nodes", headers=headers)
        assert resp.status == 401, headers
        assert resp.headers["WWW-Authenticate"].startswith('Bearer realm="myolo"')
        assert ('error="invalid_token"' in resp.headers["WWW-Authenticate"]) is invalid
        body = await resp.json()
        assert body["field"] == "Authorization" and "myoloctl token create" in body["hint"]
    write = await client.post("/v1/nodes/node-a/cordon", json={})
    assert write.status == 401
    assert audit.records == []  # nobody to record: an unauthenticated flood cannot fill the audit topic


async def test_health_and_the_document_are_open_everything_else_needs_a_token(client: TestClient) -> None:
    assert (await client.get("/healthz")).status == 200
    assert (await client.get("/openapi.json")).status == 200
    assert (await client.get("/v1/leader")).status == 401
    assert (await client.get("/v2/nothing")).status == 401  # no map of the API for strangers
    assert (await client.get("/v2/nothing", headers=bearer(VIEWER))).status == 404
    assert (await client.post("/healthz", headers=bearer(VIEWER))).status == 405


async def test_a_viewer_reads_and_is_refused_writes_naming_the_role(
    client: TestClient, fleet: MemoryFleet, audit: MemoryAudit
) -> None:
    assert (await client.get("/v1/nodes", headers=bearer(VIEWER))).status == 200
    resp = await client.post("/v1/nodes/node-a/cordon", json={"reason": "x"}, headers=bearer(VIEWER))
    assert resp.status == 403
    body = await resp.json()
    assert body["error"] == f"POST /v1/nodes/node-a/cordon needs the operator role; token '{VIEWER}' has viewer"
    assert "--role operator" in body["hint"]
    assert fleet.writes == []
    [refused] = audit.records  # the refusal is recorded, once
    assert (refused.outcome, refused.status, refused.who, refused.role) == ("refused", 403, VIEWER, "viewer")
    assert refused.target == "node-a" and refused.route == "/v1/nodes/{node_id}/cordon"


async def test_admin_only_routes_need_an_admin(client: TestClient) -> None:
    for name, status in [(VIEWER, 403), (OPERATOR, 403), (ADMIN, 200)]:
        resp = await client.put("/v1/toys/t1/key", json={}, headers=bearer(name))
        assert resp.status == status, name
    answer = await (await client.put("/v1/toys/t1/key", json={}, headers=bearer(ADMIN))).json()
    assert answer == {"name": ADMIN, "role": "admin"}
    refused = await (await client.put("/v1/toys/t1/key", json={}, headers=bearer(OPERATOR))).json()
    assert "needs the admin role" in refused["error"]
    assert (await client.get("/v1/toys", headers=bearer(VIEWER))).status == 200  # its plain read is a viewer's
    for method in ("GET", "HEAD"):  # an admin-only read: its HEAD too (a status alone can tell a secret)
        assert (await client.request(method, "/v1/toys/t1/key", headers=bearer(OPERATOR))).status == 403
        assert (await client.request(method, "/v1/toys/t1/key", headers=bearer(ADMIN))).status == 200


def test_an_admin_route_or_body_type_that_names_no_route_is_an_error_at_start(fleet: MemoryFleet) -> None:
    typo = RouteSet([], admin_routes=(("PUT", "/v1/toys/{id}/key"),))
    with pytest.raises(ValueError, match="admin_routes name routes that are not registered"):
        create_app(fleet, [toy_part(), typo], security())
    wrong = RouteSet([], body_types={("POST", "/v1/nope"): frozenset({"text/csv"})})
    with pytest.raises(ValueError, match="body_types name routes"):
        create_app(fleet, [wrong], security())


async def test_an_operator_writes_and_the_record_names_the_token(
    client: TestClient, fleet: MemoryFleet, audit: MemoryAudit
) -> None:
    resp = await client.post("/v1/nodes/node-a/cordon", json={"reason": "fan"}, headers=bearer(OPERATOR))
    assert resp.status == 200
    assert fleet.writes[0].by == f"operator:{OPERATOR}"
    attempt, done = audit.records
    assert (attempt.outcome, attempt.status, done.outcome, done.status) == ("attempt", None, "done", 200)
    assert attempt.request_id == done.request_id
    assert (done.who, done.role, done.method, done.path) == (OPERATOR, "operator", "POST", "/v1/nodes/node-a/cordon")
    assert done.target == "node-a" and done.coordinator == "coord-a" and done.remote == "127.0.0.1"
    assert done.time == fleet.now()
    assert (await client.get("/v1/nodes", headers=bearer(OPERATOR))).status == 200
    assert len(audit.records) == 2  # reads are not audited


@pytest.mark.parametrize(
    ("kw", "sent"),
    [
        ({"skip_auto_headers": ["Content-Type"]}, "no Content-Type"),  # an empty body is refused too
        ({"data": b"", "headers": {"Content-Type": "application/octet-stream"}}, "application/octet-stream"),
        ({"data": b'{"reason": "x"}', "headers": {"Content-Type": "text/plain"}}, "text/plain"),
        ({"data": {"reason": "x"}}, "application/x-www-form-urlencoded"),
        ({"data": b"reason=x", "headers": {"Content-Type": "application/yaml"}}, "application/yaml"),
    ],
)
async def test_a_write_is_json_or_a_415(
    client: TestClient, fleet: MemoryFleet, audit: MemoryAudit, kw: dict, sent: str
) -> None:
    headers = {**bearer(OPERATOR), **kw.pop("headers", {})}
    resp = await client.post("/v1/nodes/node-a/cordon", headers=headers, **kw)
    assert resp.status == 415
    body = await resp.json()
    assert body["field"] == "Content-Type" and sent in body["error"] and "application/json" in body["hint"]
    assert fleet.writes == []
    assert [(r.outcome, r.status) for r in audit.records] == [("refused", 415)]
    empty_json = await client.post("/v1/nodes/node-a/cordon", headers={**bearer(OPERATOR), **JSON})
    assert empty_json.status == 200  # the same empty body as JSON: every default


async def test_no_audit_record_no_write(client: TestClient, fleet: MemoryFleet, audit: MemoryAudit) -> None:
    audit.failing = True
    resp = await client.post("/v1/nodes/node-a/cordon", json={"reason": "x"}, headers=bearer(OPERATOR))
    assert resp.status == 503
    assert "audit record could not be written" in (await resp.json())["error"]
    assert fleet.writes == [] and fleet.node("node-a").cordon is None
    assert (await client.get("/v1/nodes", headers=bearer(VIEWER))).status == 200  # reads go on
    audit.failing = False
    assert (await client.post("/v1/nodes/node-a/cordon", json={}, headers=bearer(OPERATOR))).status == 200


async def test_a_lost_result_record_is_counted_and_the_answer_still_tells_the_truth(
    fleet: MemoryFleet, audit: MemoryAudit
) -> None:
    sec = security(audit, fleet.clock, fleet.instance_id)
    sent = []

    async def attempt_only(record) -> None:
        if record.outcome != "attempt":
            raise ConnectionError("Kafka went away just now")
        sent.append(record)

    sec.audit.send = attempt_only
    client = TestClient(TestServer(create_app(fleet, parts_for(fleet), sec)))
    await client.start_server()
    try:
        resp = await client.post("/v1/nodes/node-a/cordon", json={}, headers=bearer(OPERATOR))
        assert resp.status == 200 and len(fleet.writes) == 1  # it happened: the answer says so
        assert [r.outcome for r in sent] == ["attempt"] and sec.audit.lost == 1
        assert "Kafka went away" in sec.audit.last_error
    finally:
        await client.close()


async def test_errors_and_redirects_are_recorded_with_their_outcome(
    client: TestClient, fleet: MemoryFleet, audit: MemoryAudit
) -> None:
    await client.post("/v1/nodes/ghost/cordon", json={}, headers=bearer(OPERATOR))
    fleet.is_leader, fleet.leader_url = False, "http://10.0.0.9:8480"
    await client.post("/v1/nodes/node-a/cordon", json={}, headers=bearer(OPERATOR), allow_redirects=False)
    results = [(r.outcome, r.status, r.target) for r in audit.records if r.outcome != "attempt"]
    assert results == [("refused", 404, "ghost"), ("redirected", 307, "node-a")]
    assert "'ghost' is not known" in audit.records[1].error


async def test_without_authentication_everyone_is_an_anonymous_admin(fleet: MemoryFleet, audit: MemoryAudit) -> None:
    sec = security(audit, fleet.clock)
    open_sec = type(sec)(Authenticator(None), sec.audit)
    client = TestClient(TestServer(create_app(fleet, [*parts_for(fleet), toy_part()], open_sec)))
    await client.start_server()
    try:
        assert (await client.put("/v1/toys/t/key", json={})).status == 200
        resp = await client.post("/v1/nodes/node-a/cordon", json={})
        assert resp.status == 200 and fleet.writes[0].by == "operator:anonymous"
        assert audit.records[-1].who == "anonymous"
        assert (await client.post("/v1/nodes/node-a/cordon", data=b"{}")).status == 415  # still JSON only
    finally:
        await client.close()
