"""Every refusal of the coordinator's family answers its HTTP status, with its field and hint, from one table;
an error answer reads back into the refusal it was."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from myolo.coordinator.api.auth import by_refused, unauthorized
from myolo.coordinator.api.errors import HTTP_STATUS, json_errors, refusal_of, status_of
from myolo.coordinator.core.errors import (
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    NotLeader,
    Refusal,
    TooLarge,
    Unauthenticated,
    Unavailable,
    UnknownNode,
    Unsupported,
)
from myolo.coordinator.jobs.interface import JobConflict, UnknownJob
from myolo.coordinator.jobs.manifest import ManifestError
from myolo.coordinator.nodes.interface import NotEnrolled
from myolo.coordinator.preflight.interface import PreflightRefused, UnknownPreflightNode
from myolo.coordinator.registry.errors import RegistryError, RegistryFull, UnknownAlias, UnknownModel, UnknownVersion
from myolo.coordinator.rollouts.interface import RolloutConflict, RolloutError, UnknownRollout

KINDS = [
    (Invalid, 400),
    (Unauthenticated, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (TooLarge, 413),
    (Unsupported, 415),
    (Unavailable, 503),
]

# each component's refusal, as the component raises it, and the status the API answers it with
COMPONENTS: list[tuple[Callable[[], Refusal], int, str | None]] = [
    (lambda: UnknownNode("n9"), 404, "id"),
    (lambda: UnknownJob("j"), 404, "name"),
    (lambda: JobConflict("spec.trainer.model", "it cannot change"), 409, "spec.trainer.model"),
    (lambda: ManifestError("spec.replica.tp", "must be >= 1"), 400, "spec.replica.tp"),
    (lambda: ManifestError("", "not valid YAML"), 400, "manifest"),
    (lambda: RegistryError("alias", "is not an alias name"), 400, "alias"),
    (lambda: RegistryFull("version", "100 versions (registry.max_versions)"), 409, "version"),
    (lambda: UnknownModel("m"), 404, "model"),
    (lambda: UnknownVersion("m", 9, "parent"), 400, "parent"),  # named in a body: the body is wrong
    (lambda: UnknownAlias("m", "staging"), 404, "alias"),
    (lambda: RolloutError("component", "not something agents install"), 400, "component"),
    (lambda: RolloutConflict("phase", "it is Succeeded"), 409, "phase"),
    (lambda: UnknownRollout("name", "no rollout named 'x'"), 404, "name"),
    (lambda: UnknownPreflightNode("zz", "nodes[0]"), 404, "nodes[0]"),
    (lambda: PreflightRefused("a pre-flight is running", "wait for it"), 409, None),
    (lambda: NotEnrolled("n1"), 404, "node_id"),
    (lambda: by_refused(), 400, "by"),
    (lambda: unauthorized("no token"), 401, "Authorization"),
]


@pytest.mark.parametrize(("kind", "status"), KINDS)
def test_each_kind_has_its_status_and_reads_back_as_itself(kind: type[Refusal], status: int) -> None:
    assert HTTP_STATUS[kind] == status
    refusal = kind("what went wrong", field="f", hint="do this")
    assert status_of(refusal) == status
    back = refusal_of(status, {"error": "what went wrong", "field": "f", "hint": "do this"})
    assert type(back) is kind and back.status == status
    assert (back.error, back.field, back.hint) == ("what went wrong", "f", "do this")


def test_every_kind_is_in_the_table() -> None:
    assert set(HTTP_STATUS) == {k for k, _ in KINDS}
    assert len(set(HTTP_STATUS.values())) == len(HTTP_STATUS)  # one kind per status: the way back is unique


def test_an_answer_of_no_kind_reads_back_as_a_plain_refusal() -> None:
    internal = refusal_of(500, {"error": "internal error: KeyError: 'x'", "hint": "see the coordinator's log"})
    assert type(internal) is Refusal and internal.status == 500 and internal.hint == "see the coordinator's log"
    html = refusal_of(502, "<html>bad gateway</html>")
    assert type(html) is Refusal and html.error == "HTTP 502" and html.field is None


@pytest.mark.parametrize(("make", "status", "field"), COMPONENTS)
def test_component_refusals_are_of_a_kind(make: Callable[[], Refusal], status: int, field: str | None) -> None:
    refusal = make()
    assert status_of(refusal) == status
    assert refusal.field == field
    assert refusal.error == str(refusal)


class Raising:
    """A server whose one route raises what ``make`` makes."""

    def __init__(self) -> None:
        self.make: Callable[[], BaseException] = lambda: Invalid("unset")
        self.client: TestClient


@pytest.fixture
async def raising() -> AsyncIterator[Raising]:
    served = Raising()

    async def route(request: web.Request) -> web.Response:
        raise served.make()

    app = web.Application(middlewares=[json_errors])
    app.router.add_post("/x", route)
    served.client = TestClient(TestServer(app))
    await served.client.start_server()
    yield served
    await served.client.close()


@pytest.mark.parametrize(("make", "status", "field"), COMPONENTS)
async def test_the_api_answers_each_refusal_with_its_status_field_and_hint(
    raising: Raising, make: Callable[[], Refusal], status: int, field: str | None
) -> None:
    raising.make = make
    resp = await raising.client.post("/x")
    assert resp.status == status
    body = await resp.json()
    refusal = make()
    assert body["error"] == refusal.error
    assert body.get("field") == field
    assert body.get("hint") == refusal.hint
    assert set(body) <= {"error", "field", "hint"}


async def test_not_leader_is_a_redirect_and_an_unexpected_error_a_500(raising: Raising) -> None:
    raising.make = lambda: NotLeader("http://leader:8480", "coord-b")
    resp = await raising.client.post("/x?a=1", allow_redirects=False)
    assert resp.status == 307 and resp.headers["Location"] == "http://leader:8480/x?a=1"
    raising.make = lambda: NotLeader(None)
    resp = await raising.client.post("/x")
    assert resp.status == 503 and resp.headers["Retry-After"] == "1"
    raising.make = lambda: KeyError("x")
    resp = await raising.client.post("/x")
    assert resp.status == 500 and "KeyError" in (await resp.json())["error"]
