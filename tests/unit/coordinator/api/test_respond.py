"""Every route answers JSON one way: ``api/respond.py``."""

from __future__ import annotations

import json
from pathlib import Path

from myolo.coordinator.api.answers import ErrorAnswer
from myolo.coordinator.api.respond import json_response
from myolo.coordinator.nodes.answers import key_answer
from myolo.coordinator.nodes.records import NodeKeyRecord

ROOT = Path(__file__).resolve().parents[4] / "coordinator"


def test_a_struct_is_encoded_with_its_omitted_defaults() -> None:
    resp = json_response(ErrorAnswer(error="bad", field="replicas"), 400, {"Retry-After": "1"})
    assert (resp.status, resp.content_type, resp.headers["Retry-After"]) == (400, "application/json", "1")
    assert json.loads(resp.body) == {"error": "bad", "field": "replicas"}


def test_a_key_answer_says_its_change_only_after_an_enrolment() -> None:
    record = NodeKeyRecord(node_id="n1", public_key="PEM", key_id="k", enrolled_at=1.0, by="operator:a")
    plain = json.loads(json_response(key_answer(record)).body)
    assert plain == {"node_id": "n1", "public_key": "PEM", "key_id": "k", "enrolled_at": 1.0, "by": "operator:a"}
    assert json.loads(json_response(key_answer(record, "enrolled")).body) == {**plain, "change": "enrolled"}


def test_no_route_module_encodes_json_another_way() -> None:
    modules = [*ROOT.glob("*/routes.py"), *ROOT.glob("api/*.py")]
    offenders = [
        f"{path.relative_to(ROOT)}: {pattern}"
        for path in modules
        if path.name != "respond.py"
        for pattern in ("web.json_response", "msgspec.to_builtins", "def _json", "msgspec.json.encode")
        if pattern in path.read_text()
    ]
    assert offenders == []
