"""The OpenAPI document matches the API: every route is described, and real answers fit their schemas."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from myolo.coordinator.api import openapi
from myolo.coordinator.api.app import create_app
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.cordons.component import Cordons
from myolo.coordinator.fleet.component import Fleet
from myolo.coordinator.jobs import manifest, records
from myolo.coordinator.jobs import routes as job_routes
from myolo.coordinator.jobs.answers import JobAnswer
from myolo.events.payloads.trainer_job import TrainerJob
from tests.support.api_auth import OPERATOR, VIEWER, bearer, security
from tests.support.coordinator import memory_jobs
from tests.support.coordinator.api_fleet import MemoryFleet, app_for, node, sick_node
from tests.support.coordinator.offline import offline_coordinator

_TYPES = {"object": dict, "array": list, "string": str, "integer": int, "boolean": bool, "number": (int, float)}


def _resolve(doc: dict, schema: dict) -> dict:
    while "$ref" in schema:
        *_, group, name = schema["$ref"].split("/")
        schema = doc["components"][group][name]
    return schema


def check(doc: dict, schema: dict, value: Any, where: str = "$") -> list[str]:
    """The subset of OpenAPI 3.0 schema rules this document uses; returns the mismatches found."""
    schema = _resolve(doc, schema)
    if value is None:
        return [] if schema.get("nullable") else [f"{where}: null but not nullable"]
    errors: list[str] = []
    for part in schema.get("allOf", []):
        errors += check(doc, part, value, where)
    kind = schema.get("type")
    if kind and (not isinstance(value, _TYPES[kind]) or (kind in ("integer", "number") and isinstance(value, bool))):
        return [*errors, f"{where}: {value!r} is not {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in {schema['enum']}")
    if isinstance(value, dict):
        errors += [f"{where}: missing {k}" for k in schema.get("required", []) if k not in value]
        props = schema.get("properties", {})
        for key, sub in props.items():
            if key in value:
                errors += check(doc, sub, value[key], f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += check(doc, schema["items"], item, f"{where}[{i}]")
    return errors


def _declared_properties(doc: dict, schema: dict) -> set[str]:
    schema = _resolve(doc, schema)
    names = set(schema.get("properties", {}))
    for part in schema.get("allOf", []):
        names |= _declared_properties(doc, part)
    return names


def _response_schema(doc: dict, path: str, method: str, status: int) -> dict:
    response = _resolve(doc, doc["paths"][path][method]["responses"][str(status)])
    return response["content"]["application/json"]["schema"]


@pytest.fixture
async def client() -> TestClient:
    fleet = MemoryFleet()
    fleet.add(node("node-a", fleet.now()))
    fleet.add(sick_node("node-c", fleet.now()))
    client = TestClient(TestServer(app_for(fleet)), headers=bearer(OPERATOR))
    await client.start_server()
    yield client
    await client.close()


def openapi_document() -> dict:
    return openapi.for_components(COMPONENTS)


def test_every_route_is_documented_and_every_documented_path_is_routed(tmp_path) -> None:
    """The real coordinator's app (every component's routes) against the assembled document."""
    coord = offline_coordinator(tmp_path)
    app = create_app(coord, [p for p in (c.api() for c in coord.peers) if p is not None], security())
    routed = {(r.resource.canonical, r.method.lower()) for r in app.router.routes() if r.method != "HEAD"}
    doc = openapi_document()
    documented = {(p, m) for p, ops in doc["paths"].items() for m in ops if m != "parameters"}
    assert routed == documented
    assert doc["openapi"].startswith("3.")
    assert all(op.get("operationId") for ops in doc["paths"].values() for op in ops.values())


async def test_served_document_is_the_assembled_one(client: TestClient) -> None:
    resp = await client.get("/openapi.json")
    assert resp.status == 200
    served = await resp.json()
    assert served == openapi.assemble([Fleet.openapi, Cordons.openapi])
    assert served["paths"].keys() == yaml.safe_load(openapi.CORE_OPENAPI.read_text())["paths"].keys() | {
        "/v1/nodes",
        "/v1/nodes/{node_id}",
        "/v1/gpus",
        "/v1/nodes/{node_id}/interval",
        "/v1/nodes/{node_id}/cordon",
        "/v1/nodes/{node_id}/uncordon",
    }


def test_fragments_that_define_one_name_differently_are_refused(tmp_path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("components: {schemas: {Thing: {type: string}}}\n")
    b.write_text("components: {schemas: {Thing: {type: integer}}}\n")
    assert openapi.assemble([a, a])["components"]["schemas"]["Thing"] == {"type": "string"}  # identical: fine
    with pytest.raises(ValueError, match=r"components\.schemas\.Thing is defined differently"):
        openapi.assemble([a, b])
    c = tmp_path / "c.yaml"
    c.write_text("info: {title: x}\n")
    with pytest.raises(ValueError, match="only paths and components"):
        openapi.assemble([c])


@pytest.mark.parametrize(
    ("method", "url", "path", "status", "body"),
    [
        ("get", "/healthz", "/healthz", 200, None),
        ("get", "/v1/nodes", "/v1/nodes", 200, None),
        ("get", "/v1/nodes/node-c", "/v1/nodes/{node_id}", 200, None),
        ("get", "/v1/nodes/zzz", "/v1/nodes/{node_id}", 404, None),
        ("get", "/v1/gpus", "/v1/gpus", 200, None),
        ("get", "/v1/leader", "/v1/leader", 200, None),
        ("post", "/v1/nodes/node-a/cordon", "/v1/nodes/{node_id}/cordon", 200, {"reason": "r"}),
        ("post", "/v1/nodes/node-a/uncordon", "/v1/nodes/{node_id}/uncordon", 400, {"reason": 1}),
        ("post", "/v1/nodes/zzz/uncordon", "/v1/nodes/{node_id}/uncordon", 404, {}),
        ("post", "/v1/nodes/node-a/cordon", "/v1/nodes/{node_id}/cordon", 401, "no token"),
        ("post", "/v1/nodes/node-a/cordon", "/v1/nodes/{node_id}/cordon", 403, "viewer"),
        ("post", "/v1/nodes/node-a/cordon", "/v1/nodes/{node_id}/cordon", 415, "form"),
    ],
)
async def test_answers_fit_their_documented_schema(
    client: TestClient, method: str, url: str, path: str, status: int, body: Any
) -> None:
    if body == "no token":
        resp = await client.request(method.upper(), url, json={}, headers={"Authorization": ""})
    elif body == "viewer":
        resp = await client.request(method.upper(), url, json={}, headers=bearer(VIEWER))
    elif body == "form":
        resp = await client.request(method.upper(), url, data={"reason": "r"})
    else:
        resp = await client.request(method.upper(), url, json=body)
    assert resp.status == status
    doc = openapi_document()
    answer = await resp.json()
    schema = _response_schema(doc, path, method, status)
    assert check(doc, schema, answer) == []


async def test_node_schemas_declare_every_field_the_api_sends(client: TestClient) -> None:
    """A field added to NodeState shows up here until the document describes it."""
    doc = openapi_document()
    schemas = doc["components"]["schemas"]
    summary = (await (await client.get("/v1/nodes")).json())["items"][1]
    assert set(summary) - _declared_properties(doc, schemas["NodeSummary"]) == set()
    full = await (await client.get("/v1/nodes/node-c")).json()
    assert set(full) - _declared_properties(doc, schemas["Node"]) == set()
    gpus = (await (await client.get("/v1/gpus")).json())["items"]
    assert set().union(*gpus) - _declared_properties(doc, schemas["GpuRow"]) == set()


def test_the_checker_catches_a_mismatch() -> None:
    doc = openapi_document()
    leader = {"$ref": "#/components/schemas/Leader"}
    assert check(doc, leader, {"leader_id": None, "epoch": 1, "api_url": None, "instance_id": "a", "is_leader": 1})
    assert check(doc, leader, {"leader_id": "a", "epoch": 1, "api_url": None, "instance_id": "a"}) == [
        "$: missing is_leader"
    ]


# -- the jobs' routes (their component is listed in COMPONENTS separately; these hold before and after) ----------
@pytest.fixture
async def jobs_client() -> TestClient:
    jobs = memory_jobs.MemoryJobs()
    jobs.add(memory_jobs.running_job(jobs.clock.now(), name="running"))
    jobs.add(memory_jobs.running_job(jobs.clock.now(), name="pretrain"))  # what MANIFEST less "tiny-" applies to
    client = TestClient(TestServer(memory_jobs.app_for(jobs)), headers=bearer(OPERATOR))
    await client.start_server()
    yield client
    await client.close()


def test_every_jobs_route_is_documented_and_every_documented_jobs_path_is_routed() -> None:
    app = memory_jobs.app_for(memory_jobs.MemoryJobs())
    routed = {(r.resource.canonical, r.method.lower()) for r in app.router.routes() if r.method != "HEAD"}
    doc = openapi.assemble([job_routes.OPENAPI])
    fragment = yaml.safe_load(job_routes.OPENAPI.read_text())
    documented = {(p, m) for p, ops in fragment["paths"].items() for m in ops if m != "parameters"}
    core = {(p, m) for p, ops in yaml.safe_load(openapi.CORE_OPENAPI.read_text())["paths"].items() for m in ops}
    assert routed == documented | core
    assert all(doc["paths"][p][m].get("operationId") for p, m in documented)
    assert openapi.for_components(COMPONENTS)  # the fragment merges with every component's document
    openapi.assemble([Fleet.openapi, Cordons.openapi, job_routes.OPENAPI])


_YAML = {"Content-Type": "application/yaml"}


@pytest.mark.parametrize(
    ("method", "url", "path", "status", "kw"),
    [
        ("get", "/v1/jobs", "/v1/jobs", 200, {}),
        ("get", "/v1/jobs/running", "/v1/jobs/{name}", 200, {}),
        ("get", "/v1/jobs/zzz", "/v1/jobs/{name}", 404, {}),
        ("post", "/v1/jobs", "/v1/jobs", 201, {"data": memory_jobs.MANIFEST, "headers": _YAML}),
        ("post", "/v1/jobs", "/v1/jobs", 200, {"json": {"manifest": memory_jobs.MANIFEST.replace("tiny-", "")}}),
        ("post", "/v1/jobs", "/v1/jobs", 400, {"data": "kind: Pod", "headers": _YAML}),
        (
            "post",
            "/v1/jobs",
            "/v1/jobs",
            409,
            {"json": {"manifest": memory_jobs.MANIFEST.replace("tiny-", "").replace("name: tiny}", "name: x}")}},
        ),
        ("post", "/v1/jobs", "/v1/jobs", 413, {"data": "#" * (manifest.MAX_MANIFEST_BYTES + 1), "headers": _YAML}),
        ("post", "/v1/jobs", "/v1/jobs", 415, {"data": b"x", "headers": {"Content-Type": "image/png"}}),
        ("post", "/v1/jobs/running/scale", "/v1/jobs/{name}/scale", 200, {"json": {"replicas": 2}}),
        ("post", "/v1/jobs/running/scale", "/v1/jobs/{name}/scale", 400, {"json": {"replicas": 99}}),
        ("post", "/v1/jobs/zzz/scale", "/v1/jobs/{name}/scale", 404, {"json": {"replicas": 2}}),
        ("delete", "/v1/jobs/running", "/v1/jobs/{name}", 202, {"json": {}}),
        ("delete", "/v1/jobs/zzz", "/v1/jobs/{name}", 404, {"json": {}}),
        ("delete", "/v1/jobs/running", "/v1/jobs/{name}", 415, {}),
        ("delete", "/v1/jobs/running", "/v1/jobs/{name}", 403, {"json": {}, "headers": bearer(VIEWER)}),
    ],
)
async def test_jobs_answers_fit_their_documented_schema(
    jobs_client: TestClient, method: str, url: str, path: str, status: int, kw: dict[str, Any]
) -> None:
    resp = await jobs_client.request(method.upper(), url, **kw)
    assert resp.status == status, await resp.text()
    doc = openapi.assemble([job_routes.OPENAPI])
    assert check(doc, _response_schema(doc, path, method, status), await resp.json()) == []


@pytest.mark.parametrize(
    ("schema", "struct"),
    [
        ("Job", JobAnswer),
        ("JobSpec", manifest.ElasticJobSpec),
        ("JobPolicy", manifest.Policy),
        ("TrainerJob", TrainerJob),
        ("Generation", records.Generation),
        ("JobMember", records.Member),
        ("JobProgress", records.JobProgress),
        ("JobDecision", records.Decision),
    ],
)
def test_job_schemas_declare_every_field_of_the_record(schema: str, struct: type) -> None:
    """A field added to the job's record shows up here until the document describes it."""
    doc = openapi.assemble([job_routes.OPENAPI])
    fields = {f.encode_name for f in msgspec.structs.fields(struct)}
    assert _declared_properties(doc, doc["components"]["schemas"][schema]) == fields
