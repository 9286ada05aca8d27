"""Every route's body is decoded one way (``api/body.py``): an empty body is ``{}``, a body that is not JSON,
a field nobody knows, a ``by`` and a body over its bound are refused alike, naming the field at fault."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
from aiohttp import ClientSession

from myolo.coordinator.api.body import decode_body
from myolo.coordinator.core.errors import Invalid
from myolo.coordinator.core.leadership import LeaderTerm
from tests.support.api_auth import ADMIN, bearer
from tests.support.coordinator.offline import offline_coordinator
from tests.support.coordinator.recorder import recording_producers
from tests.support.coordinator.served import serve

# one write of each component that takes a JSON body
WRITES = [
    ("POST", "/v1/nodes/n1/cordon"),
    ("POST", "/v1/preflight"),
    ("PUT", "/v1/nodes/n1/key"),
    ("POST", "/v1/jobs/j/scale"),
    ("DELETE", "/v1/jobs/j"),
    ("PUT", "/v1/models/m"),
    ("PUT", "/v1/models/m/aliases/champion"),
    ("POST", "/v1/rollouts"),
    ("PUT", "/v1/drift/m/rule"),
    ("PUT", "/v1/drift/m/references/f"),
]
JSON = {"Content-Type": "application/json"}
TOO_LARGE = 2 * 1024 * 1024  # over every route's bound (a model's, which carries a manifest, is the largest)


class Spec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    reason: str = ""
    replicas: int = 1


class Needs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    public_key: str


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[str]:
    _, producers = recording_producers()
    coord = offline_coordinator(tmp_path, producers=producers)
    await coord.assume_term(LeaderTerm(epoch=2, instance_id="me", started=0.0))
    async with serve(coord) as url:
        yield url


async def _send(url: str, method: str, path: str, data: bytes, headers: dict[str, str] = JSON) -> tuple[int, dict]:
    async with (
        ClientSession(headers=bearer(ADMIN)) as session,
        session.request(method, url + path, data=data, headers=headers) as resp,
    ):
        return resp.status, await resp.json()


def test_an_empty_body_is_every_default_and_names_a_missing_field() -> None:
    assert decode_body(b"", Spec) == Spec()
    assert decode_body(b" \n", Spec) == Spec()
    with pytest.raises(Invalid) as missing:
        decode_body(b"", Needs, "send {public_key}")
    assert missing.value.field == "public_key" and "missing required field" in missing.value.error
    assert missing.value.hint == "send {public_key}"


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        (b"{not json", None, "request body is not JSON"),
        (b'{"replicas": "3"}', "replicas", "Expected `int`"),
        (b'{"nope": 1}', "nope", "unknown field"),
        (b'{"by": "bob"}', "by", "by is not accepted"),
        (b"[1]", None, "Expected `object`"),
    ],
)
def test_a_bad_body_is_invalid_naming_the_field(raw: bytes, field: str | None, words: str) -> None:
    with pytest.raises(Invalid) as bad:
        decode_body(raw, Spec, "send {reason, replicas}")
    assert bad.value.field == field and words in bad.value.error and bad.value.hint


@pytest.mark.parametrize(("method", "path"), WRITES)
async def test_every_write_refuses_a_bad_body_alike(api: str, method: str, path: str) -> None:
    status, body = await _send(api, method, path, b"{not json")
    assert status == 400 and body["error"].startswith("request body is not JSON") and "field" not in body
    assert body["hint"]
    status, body = await _send(api, method, path, b'{"by": "bob"}')
    assert (status, body["field"]) == (400, "by") and "by is not accepted" in body["error"]
    status, body = await _send(api, method, path, b'{"no_such_field": 1}')
    assert (status, body["field"]) == (400, "no_such_field") and "unknown field" in body["error"]
    status, body = await _send(api, method, path, b" " * TOO_LARGE)
    assert (status, body.get("field")) == (413, "request body") and "the limit is" in body["error"], body
    status, body = await _send(api, method, path, b"{}", {"Content-Type": "text/plain"})
    assert (status, body["field"]) == (415, "Content-Type")


async def test_an_empty_body_is_the_same_as_an_empty_object_on_every_write(api: str) -> None:
    for method, path in WRITES:
        empty = await _send(api, method, path, b"")
        braces = await _send(api, method, path, b"{}")
        assert empty[0] // 100 == braces[0] // 100, (method, path, empty, braces)
        if empty[0] == 400:
            assert empty[1].get("field") == braces[1].get("field"), (method, path)
