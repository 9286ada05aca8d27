"""The jobs' HTTP routes over an in-memory jobs component: answers, statuses and the fields errors name."""

from __future__ import annotations

import json

import msgspec
import pytest
from aiohttp.test_utils import TestClient, TestServer

from myolo.coordinator.jobs.answers import JobAnswer, job_answer
from myolo.coordinator.jobs.manifest import MAX_MANIFEST_BYTES
from myolo.coordinator.jobs.records import with_status
from tests.support.api_auth import ADMIN, OPERATOR, bearer
from tests.support.coordinator.memory_jobs import MANIFEST, MemoryJobs, app_for, running_job

YAML = {"Content-Type": "application/yaml"}


@pytest.fixture
def jobs() -> MemoryJobs:
    return MemoryJobs()


@pytest.fixture
async def client(jobs: MemoryJobs) -> TestClient:
    client = TestClient(TestServer(app_for(jobs)), headers=bearer(OPERATOR))
    await client.start_server()
    yield client
    await client.close()


async def test_list_and_get_answer_the_full_record(client: TestClient, jobs: MemoryJobs) -> None:
    assert await (await client.get("/v1/jobs")).json() == {"items": []}
    record = jobs.add(running_job(jobs.clock.now()))
    jobs.add(running_job(jobs.clock.now(), name="another"))
    listed = await (await client.get("/v1/jobs")).json()
    assert [j["name"] for j in listed["items"]] == ["another", "tiny-pretrain"]
    resp = await client.get("/v1/jobs/tiny-pretrain")
    assert resp.status == 200
    body = await resp.json()
    answer = job_answer(record, jobs.nccl(record.name))  # one job also says what NCCL chose
    assert body == json.loads(json.dumps(msgspec.to_builtins(answer)))  # tuples become lists, nothing else
    assert msgspec.convert(body, JobAnswer) == answer  # the contract with the CLI: the record, whole
    assert body["generation"]["members"][1] == {
        "node_id": "node-c",
        "node_rank": 1,
        "gpus": [1],
        "start_command": "cmd-c2",
        "stop_command": None,
    }
    assert body["spec"]["max_replicas"] == 3 and body["decisions"][-1]["metrics"] == {"gpu_util": 81.5}


async def test_a_loss_that_is_not_finite_is_null(client: TestClient, jobs: MemoryJobs) -> None:
    job = running_job(jobs.clock.now())
    jobs.add(with_status(job, progress=msgspec.structs.replace(job.status.progress, loss=float("nan"))))
    text = await (await client.get("/v1/jobs/tiny-pretrain")).text()
    assert json.loads(text)["progress"]["loss"] is None and "NaN" not in text


async def test_unknown_job_is_a_404_naming_it(client: TestClient) -> None:
    resp = await client.get("/v1/jobs/ghost")
    assert resp.status == 404
    assert await resp.json() == {
        "error": "job 'ghost' is not known",
        "field": "name",
        "hint": "list the jobs with GET /v1/jobs",
    }
    for method, url, body in [("POST", "/v1/jobs/ghost/scale", {"replicas": 2}), ("DELETE", "/v1/jobs/ghost", {})]:
        resp = await client.request(method, url, json=body)
        assert resp.status == 404 and (await resp.json())["error"] == "job 'ghost' is not known"


async def test_apply_yaml_creates_then_updates(client: TestClient, jobs: MemoryJobs) -> None:
    resp = await client.post("/v1/jobs", data=MANIFEST, headers={**YAML, **bearer(ADMIN)})
    assert resp.status == 201
    assert resp.headers["Location"] == "/v1/jobs/tiny-pretrain"
    body = await resp.json()
    assert body["name"] == "tiny-pretrain" and body["phase"] == "Pending" and body["manifest"] == MANIFEST
    assert body["spec"]["policies"][0] == {
        "metric": "gpu_util",
        "threshold": 75.0,
        "action": "scaleOut",
        "window_s": 60.0,
        "cooldown_s": 300.0,
    }
    again = await client.post("/v1/jobs", json={"manifest": MANIFEST.replace("maxReplicas: 3", "maxReplicas: 2")})
    assert again.status == 200
    assert (await again.json())["spec"]["max_replicas"] == 2
    # who applied is the caller's token, whatever the body says
    assert jobs.writes == [
        ("apply", "tiny-pretrain", f"operator:{ADMIN}"),
        ("apply", "tiny-pretrain", f"operator:{OPERATOR}"),
    ]


@pytest.mark.parametrize("content_type", ["application/x-yaml", "text/yaml"])
async def test_apply_takes_the_usual_yaml_content_types(client: TestClient, content_type: str) -> None:
    resp = await client.post("/v1/jobs", data=MANIFEST, headers={"Content-Type": content_type})
    assert resp.status == 201


async def test_apply_refuses_text_plain_a_browser_may_send_across_origins(client: TestClient, jobs: MemoryJobs) -> None:
    resp = await client.post("/v1/jobs", data=MANIFEST, headers={"Content-Type": "text/plain"})
    assert resp.status == 415 and (await resp.json())["field"] == "Content-Type"
    assert jobs.writes == []


async def test_a_bad_manifest_is_a_400_naming_the_manifest_field(client: TestClient, jobs: MemoryJobs) -> None:
    bad = MANIFEST.replace("minReplicas: 1", "minReplicas: 4").replace("maxReplicas: 3", "maxReplicas: 2")
    resp = await client.post("/v1/jobs", data=bad, headers=YAML)
    assert resp.status == 400
    body = await resp.json()
    assert body["field"] == "spec.maxReplicas"
    assert body["error"] == "spec.maxReplicas: must be >= minReplicas (4)"
    assert "fix the manifest" in body["hint"]
    broken = await client.post("/v1/jobs", data="spec: [unclosed", headers=YAML)
    assert broken.status == 400 and (await broken.json())["field"] == "manifest"
    assert jobs.records == {}


async def test_a_change_a_running_job_cannot_take_is_a_409(client: TestClient, jobs: MemoryJobs) -> None:
    jobs.add(running_job(jobs.clock.now()))
    resp = await client.post("/v1/jobs", data=MANIFEST.replace("name: tiny}", "name: small}"), headers=YAML)
    assert resp.status == 409
    body = await resp.json()
    assert body["field"] == "spec.trainer.model" and "cannot change" in body["error"]
    assert "delete the job" in body["hint"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"manifest": 3}, "manifest"),
        ({"manifest": MANIFEST, "who": "me"}, "who"),
        ({"manifest": MANIFEST, "by": "ada"}, "by"),  # who applies is the token, not the body
        ({}, "manifest"),
    ],
)
async def test_a_bad_json_apply_is_a_400_naming_the_field(client: TestClient, body: dict, field: str) -> None:
    resp = await client.post("/v1/jobs", json=body)
    assert resp.status == 400
    assert (await resp.json())["field"] == field


async def test_apply_refuses_other_content_types_and_bad_bytes(client: TestClient) -> None:
    form = await client.post("/v1/jobs", data={"manifest": MANIFEST})
    assert form.status == 415
    assert (await form.json())["field"] == "Content-Type"
    latin = await client.post("/v1/jobs", data=MANIFEST.encode() + b"# \xe9\n", headers=YAML)
    assert latin.status == 400 and "not UTF-8" in (await latin.json())["error"]
    by_query = await client.post("/v1/jobs?by=ada", data=MANIFEST, headers=YAML)
    assert by_query.status == 400 and (await by_query.json())["field"] == "by"
    assert "not accepted" in (await by_query.json())["error"]


async def test_the_body_is_bounded_by_the_manifest_limit(client: TestClient, jobs: MemoryJobs) -> None:
    padded = MANIFEST + "#" * (MAX_MANIFEST_BYTES - len(MANIFEST) - 1) + "\n"
    assert len(padded.encode()) == MAX_MANIFEST_BYTES
    ok = await client.post("/v1/jobs", data=padded, headers=YAML)  # past the API's 64 KiB default, within 256
    assert ok.status == 201, await ok.text()
    over = padded + "#\n"
    for resp in [
        await client.post("/v1/jobs", data=over, headers=YAML),
        await client.post("/v1/jobs", json={"manifest": over}),
    ]:
        assert resp.status == 413
        body = await resp.json()
        assert str(MAX_MANIFEST_BYTES) in body["error"]

    async def stream():  # no Content-Length: the bound holds as the body arrives
        for _ in range(5):
            yield b"#" * (MAX_MANIFEST_BYTES // 4) + b"\n"

    chunked = await client.post("/v1/jobs", data=stream(), headers=YAML)
    assert chunked.status == 413 and (await chunked.json())["field"] == "manifest"
    assert [w[0] for w in jobs.writes] == ["apply"]


async def test_scale_pins_the_replicas(client: TestClient, jobs: MemoryJobs) -> None:
    jobs.add(running_job(jobs.clock.now()))
    resp = await client.post("/v1/jobs/tiny-pretrain/scale", json={"replicas": 3})
    assert resp.status == 200
    body = await resp.json()
    assert body["desired_replicas"] == 3
    assert body["decisions"][-1]["kind"] == "scale" and body["decisions"][-1]["by"] == f"operator:{OPERATOR}"
    refused = await client.post("/v1/jobs/tiny-pretrain/scale", json={"replicas": 2, "by": "ada"})
    assert refused.status == 400 and (await refused.json())["field"] == "by"


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"replicas": 9}, "replicas", "outside the job's bounds: minReplicas 1, maxReplicas 3"),
        ({"replicas": "two"}, "replicas", "Expected `int`"),
        ({"replicas": -1}, "replicas", ">= 0"),
        ({}, "replicas", "missing required field"),
        ({"replicas": 2, "force": True}, "force", "unknown field"),
    ],
)
async def test_a_bad_scale_is_a_400_naming_the_field(
    client: TestClient, jobs: MemoryJobs, body: dict, field: str, words: str
) -> None:
    jobs.add(running_job(jobs.clock.now()))
    resp = await client.post("/v1/jobs/tiny-pretrain/scale", json=body)
    assert resp.status == 400
    answer = await resp.json()
    assert answer["field"] == field and words in answer["error"]
    assert jobs.job("tiny-pretrain").spec.desired_replicas is None


async def test_scale_body_is_json(client: TestClient, jobs: MemoryJobs) -> None:
    jobs.add(running_job(jobs.clock.now()))
    resp = await client.post(
        "/v1/jobs/tiny-pretrain/scale", data=b"replicas=2", headers={"Content-Type": "application/json"}
    )
    assert resp.status == 400 and "not JSON" in (await resp.json())["error"]
    form = await client.post("/v1/jobs/tiny-pretrain/scale", data=b"replicas=2")
    assert form.status == 415
    huge = await client.post("/v1/jobs/tiny-pretrain/scale", json={"replicas": 2, "note": "x" * 5000})
    assert huge.status == 413


async def test_delete_answers_202_and_the_deletion_proceeds(client: TestClient, jobs: MemoryJobs) -> None:
    jobs.add(running_job(jobs.clock.now()))
    resp = await client.delete("/v1/jobs/tiny-pretrain", json={})
    assert resp.status == 202
    assert (await resp.json())["deleting"] is True
    jobs.add(running_job(jobs.clock.now(), name="other"))
    empty = await client.delete("/v1/jobs/other", headers={"Content-Type": "application/json", **bearer(ADMIN)})
    assert empty.status == 202
    assert jobs.writes == [
        ("delete", "tiny-pretrain", f"operator:{OPERATOR}"),
        ("delete", "other", f"operator:{ADMIN}"),
    ]
    for refused in [
        await client.delete("/v1/jobs/other", json={"by": "bob"}),
        await client.delete("/v1/jobs/other?by=bob", json={}),
    ]:
        assert refused.status == 400 and (await refused.json())["field"] == "by"
    assert len(jobs.writes) == 2


async def test_writes_on_a_standby_are_redirected_to_the_leader() -> None:
    standby = MemoryJobs(leader=False, leader_url="http://10.0.0.9:8480")
    standby.add(running_job(standby.clock.now()))
    client = TestClient(TestServer(app_for(standby)), headers=bearer(OPERATOR))
    await client.start_server()
    try:
        for method, url, kw in [
            ("POST", "/v1/jobs", {"data": MANIFEST, "headers": YAML}),
            ("POST", "/v1/jobs/tiny-pretrain/scale", {"json": {"replicas": 2}}),
            ("DELETE", "/v1/jobs/tiny-pretrain", {"json": {}}),
        ]:
            resp = await client.request(method, url, allow_redirects=False, **kw)
            assert resp.status == 307, (method, url)
            assert resp.headers["Location"] == "http://10.0.0.9:8480" + url
        reads = await client.get("/v1/jobs/tiny-pretrain")
        assert reads.status == 200  # reads are served by every coordinator
        assert standby.writes == []
    finally:
        await client.close()


async def test_a_standby_without_a_known_leader_answers_503() -> None:
    client = TestClient(TestServer(app_for(MemoryJobs(leader=False))), headers=bearer(OPERATOR))
    await client.start_server()
    try:
        resp = await client.post("/v1/jobs", data=MANIFEST, headers=YAML)
        assert resp.status == 503 and resp.headers["Retry-After"] == "1"
    finally:
        await client.close()
