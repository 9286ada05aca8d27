"""The registry's HTTP routes on a real (offline) coordinator behind the real gate: reads, writes with the
caller's token as ``by``, the admin check on retraining templates and margins, field errors as 4xx, a standby's
307 to the leader, and every answer fitting its documented schema."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from aiohttp.test_utils import TestClient, TestServer

from myolo.coordinator.api import openapi
from myolo.coordinator.api.app import create_app
from myolo.coordinator.components import COMPONENTS
from myolo.coordinator.core.coordinator import Coordinator
from myolo.coordinator.core.leadership import LeaderTerm
from myolo.coordinator.registry import answers, records
from myolo.coordinator.registry.interface import NewVersion
from tests.support.api_auth import ADMIN, OPERATOR, VIEWER, bearer, security
from tests.support.coordinator.offline import offline_coordinator
from tests.support.coordinator.registry import TEMPLATE, Leading, evaluated, replay, sha
from tests.unit.coordinator.api.test_openapi import _declared_properties, _response_schema, check

DOC = openapi.for_components(COMPONENTS)
BY = f"operator:{OPERATOR}"


async def _client(coord: Coordinator, who: str = OPERATOR) -> TestClient:
    parts = [p for p in (c.api() for c in coord.peers) if p is not None]
    client = TestClient(TestServer(create_app(coord, parts, security())), headers=bearer(who))
    await client.start_server()
    return client


@pytest.fixture
async def lead(tmp_path) -> Leading:
    return await Leading(tmp_path).lead()


@pytest.fixture
async def client(lead: Leading) -> AsyncIterator[TestClient]:
    client = await _client(lead.coord)
    yield client
    await client.close()


def fits(path: str, method: str, status: int, body: Any) -> None:
    assert check(DOC, _response_schema(DOC, path, method, status), body) == [], body


def version_body(name: str, loss: float | None = None, **kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"artifact": f"s3://models/{name}/model.safetensors", "sha256": sha(name), **kw}
    if loss is not None:
        body["eval"] = msgspec.to_builtins(evaluated(loss))
    return body


async def test_register_read_and_list_through_the_api(client: TestClient, lead: Leading) -> None:
    first = await client.post("/v1/models/credit-risk/versions", json=version_body("a", 2.0, description="first"))
    assert first.status == 201, await first.text()
    body = await first.json()
    fits("/v1/models/{model}/versions", "post", 201, body)
    assert first.headers["Location"] == "/v1/models/credit-risk/versions/1"
    assert (body["version"], body["by"], body["source"], body["aliases"]) == (1, BY, "external", ["challenger"])
    again = await client.post("/v1/models/credit-risk/versions", json=version_body("a", 2.0))
    assert again.status == 200 and (await again.json())["version"] == 1  # registered already
    second = await client.post(
        "/v1/models/credit-risk/versions", json=version_body("b", parent=1, tags={"team": "risk"})
    )
    assert second.status == 201

    models = await (await client.get("/v1/models")).json()
    fits("/v1/models", "get", 200, models)
    assert [(m["name"], m["latest_version"], m["aliases"]) for m in models["items"]] == [
        ("credit-risk", 2, {"challenger": 2})
    ]
    page = await (await client.get("/v1/models/credit-risk/versions?limit=1")).json()
    fits("/v1/models/{model}/versions", "get", 200, page)
    assert [v["version"] for v in page["items"]] == [2] and page["next_before"] == 2 and page["total"] == 2
    rest = await (await client.get("/v1/models/credit-risk/versions?limit=1&before=2")).json()
    assert [v["version"] for v in rest["items"]] == [1] and rest["next_before"] is None

    shown = await (await client.get("/v1/models/credit-risk/versions/2")).json()
    fits("/v1/models/{model}/versions/{version}", "get", 200, shown)
    assert [(e["version"], e.get("parent")) for e in shown["lineage"]] == [(2, 1), (1, None)]
    assert shown["tags"] == {"team": "risk"}


async def test_aliases_through_the_api_with_who_when_why(client: TestClient, lead: Leading) -> None:
    await lead.registry.register("m", NewVersion(artifact="/a", sha256=sha("a")), "auto")
    await lead.registry.register("m", NewVersion(artifact="/b", sha256=sha("b")), "auto")
    moved = await client.put("/v1/models/m/aliases/champion", json={"version": 1, "reason": "passed the shadow test"})
    assert moved.status == 200, await moved.text()
    fits("/v1/models/{model}/aliases/{alias}", "put", 200, await moved.json())
    await lead.clock.advance(30)
    await client.put("/v1/models/m/aliases/champion", json={"version": 2, "reason": "4% better"})
    history = await (await client.get("/v1/models/m/aliases/champion/history")).json()
    fits("/v1/models/{model}/aliases/{alias}/history", "get", 200, history)
    assert [(c["version"], c.get("previous"), c["by"], c["reason"]) for c in history["history"]] == [
        (2, 1, BY, "4% better"),  # newest first
        (1, None, BY, "passed the shadow test"),
    ]
    then = history["history"][1]["when"] + 10
    at = await (await client.get(f"/v1/models/m/aliases/champion/history?at={then}")).json()
    assert (at["at"], at["version_at"]) == (then, 1)
    listed = await (await client.get("/v1/models/m/aliases")).json()
    fits("/v1/models/{model}/aliases", "get", 200, listed)
    assert {a["alias"]: (a["version"], a["last"]["by"]) for a in listed["items"]} == {
        "challenger": (2, "auto"),
        "champion": (2, BY),
    }
    removed = await client.delete("/v1/models/m/aliases/champion", json={"reason": "pulled"})
    assert removed.status == 200 and (await removed.json())["version"] is None
    fits("/v1/models/{model}/aliases/{alias}", "delete", 200, await removed.json())


@pytest.mark.parametrize(
    ("method", "url", "body", "status", "field", "words"),
    [
        ("put", "/v1/models/m/aliases/champion", {"version": 9, "reason": "r"}, 400, "version", "has no version 9"),
        ("put", "/v1/models/m/aliases/champion", {"version": 1}, 400, "reason", "missing required field"),
        ("put", "/v1/models/m/aliases/champion", {"version": 1, "reason": " "}, 400, "reason", "required"),
        (
            "put",
            "/v1/models/m/aliases/champion",
            {"version": 1, "reason": "r", "by": "x"},
            400,
            "by",
            "by is not accepted",
        ),
        ("put", "/v1/models/zz/aliases/champion", {"version": 1, "reason": "r"}, 404, "model", "not registered"),
        ("put", "/v1/models/m/aliases/9x", {"version": 1, "reason": "r"}, 400, "alias", "not an alias name"),
        ("delete", "/v1/models/m/aliases/nope", {"reason": "r"}, 404, "alias", "has no alias"),
        ("post", "/v1/models/m/versions", {"artifact": "/x", "sha256": "no"}, 400, "sha256", "regex"),
        ("post", "/v1/models/m/versions", version_body("p", parent=5), 400, "parent", "has no version 5"),
        ("post", "/v1/models/bad%20name/versions", version_body("p"), 400, "model", "not a model name"),
        ("post", "/v1/models/m/versions", version_body("p", colour="red"), 400, "colour", "unknown field"),
        ("get", "/v1/models/zz", None, 404, "model", "not registered"),
        ("get", "/v1/models/m/versions/7", None, 404, "version", "model m has no version 7"),
        ("get", "/v1/models/m/versions/x", None, 400, "version", "not a version number"),
        ("get", "/v1/models/m/versions?limit=0", None, 400, "limit", "from 1 to 1000"),
        ("get", "/v1/models/m/aliases/none/history", None, 404, "alias", "has no alias"),
        ("get", "/v1/models/m/aliases/challenger/history?at=soon", None, 400, "at", "not a time"),
    ],
)
async def test_refusals_are_4xx_naming_the_field(
    client: TestClient, lead: Leading, method: str, url: str, body: Any, status: int, field: str, words: str
) -> None:
    await lead.registry.register("m", NewVersion(artifact="/a", sha256=sha("a")), "auto")
    resp = await client.request(method.upper(), url, json=body) if body is not None else await client.get(url)
    answer = await resp.json()
    assert (resp.status, answer.get("field")) == (status, field) and words in answer["error"], answer
    path = next(p for p in DOC["paths"] if _matches(p, url.split("?")[0]))
    fits(path, method, status, answer)


def _matches(pattern: str, url: str) -> bool:
    a, b = pattern.split("/"), url.split("/")
    return len(a) == len(b) and all(x == y or x.startswith("{") for x, y in zip(a, b, strict=True))


async def test_an_operator_edits_a_description_but_only_an_admin_sets_retraining_or_margins(lead: Leading) -> None:
    operator, admin = await _client(lead.coord), await _client(lead.coord, ADMIN)
    try:
        template = {"manifest": TEMPLATE, "artifact_dir": "/srv/artifacts", "cooldown_s": 600}
        created = await operator.put("/v1/models/m", json={"description": "risk"})
        assert created.status == 201
        fits("/v1/models/{model}", "put", 201, await created.json())
        for body, field in (({"retrain": template}, "retrain"), ({"promote_margin": 0.02}, "promote_margin")):
            refused = await operator.put("/v1/models/m", json={"description": "risk", **body})
            answer = await refused.json()
            assert refused.status == 403 and answer["field"] == field and "needs the admin role" in answer["error"]
            fits("/v1/models/{model}", "put", 403, answer)
        done = await admin.put(
            "/v1/models/m", json={"description": "risk", "retrain": template, "promote_margin": 0.02}
        )
        assert done.status == 200, await done.text()
        record = await done.json()
        assert record["retrain"]["cooldown_s"] == 600 and record["by"] == f"operator:{ADMIN}"
        fits("/v1/models/{model}", "put", 200, record)
        same = {"description": "credit risk", "retrain": template, "promote_margin": 0.02}
        assert (await operator.put("/v1/models/m", json=same)).status == 200  # unchanged settings: an operator's
        cleared = await operator.put("/v1/models/m", json={"description": "credit risk"})
        assert cleared.status == 403 and (await cleared.json())["field"] == "retrain"  # clearing is a change too
        bad = await admin.put(
            "/v1/models/m", json={"retrain": {**template, "manifest": TEMPLATE + "  replica: {tp: 0}\n"}}
        )
        answer = await bad.json()
        assert bad.status == 400 and answer["field"] == "retrain.manifest" and "spec.replica.tp" in answer["error"]
        viewer = await operator.put("/v1/models/m", json={}, headers=bearer(VIEWER))
        assert viewer.status == 403
    finally:
        await operator.close()
        await admin.close()


async def test_a_standby_reads_and_redirects_writes_to_the_leader(tmp_path, lead: Leading) -> None:
    await lead.registry.register("m", NewVersion(artifact="/a", sha256=sha("a")), "auto")
    (tmp_path / "standby").mkdir()
    standby = offline_coordinator(tmp_path / "standby")
    standby.leadership.recorded(LeaderTerm(epoch=4, instance_id="me-too", api_url="http://leader:8470", started=0.0))
    replay(lead.state(), standby)
    client = await _client(standby)
    try:
        listed = await (await client.get("/v1/models/m/versions")).json()
        assert [v["version"] for v in listed["items"]] == [1]
        resp = await client.put(
            "/v1/models/m/aliases/champion", json={"version": 1, "reason": "r"}, allow_redirects=False
        )
        assert resp.status == 307 and resp.headers["Location"] == "http://leader:8470/v1/models/m/aliases/champion"
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("schema", "struct"),
    [
        ("Model", answers.ModelAnswer),
        ("ModelVersionDetail", answers.VersionAnswer),
        ("RetrainTemplate", records.RetrainTemplate),
        ("ModelAliasChange", records.AliasChange),
        ("ModelAlias", answers.AliasAnswer),
        ("NewModelVersion", NewVersion),
    ],
)
def test_registry_schemas_declare_every_field_of_the_answer(schema: str, struct: type) -> None:
    """A field added to a record or an answer shows up here until the document describes it."""
    fields = {f.encode_name for f in msgspec.structs.fields(struct)}
    declared = _declared_properties(DOC, DOC["components"]["schemas"][schema])
    assert declared == fields
