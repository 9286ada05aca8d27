"""``myoloctl`` exits alike for the same failure in every command, and its help lists the codes: a fake API
answers every request with one error, and each command that asks the coordinators meets it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from typer.testing import CliRunner, Result

from myolo.coordinator.cli.exits import EXIT_CODE, FAILED, REFUSED, exit_code
from myolo.coordinator.cli.main import app
from myolo.coordinator.core.errors import Conflict, Invalid, NotFound, Refusal, TooLarge, Unavailable, Unsupported
from tests.support.api_auth import OPERATOR, token
from tests.support.helpers import refused_port

# one command of each group that asks the coordinators (its first request meets the error)
COMMANDS = [
    ("get", "nodes"),
    ("describe", "node", "n1"),
    ("describe", "job", "j"),
    ("cordon", "n1"),
    ("uncordon", "n1"),
    ("scale", "job", "j", "--replicas", "2"),
    ("delete", "job", "j"),
    ("node", "revoke", "n1"),
    ("registry", "models"),
    ("drift", "status"),
    ("rollout", "history"),
    ("preflight", "n1"),
]
# (HTTP status, exit code): the caller's to fix is 2; not carried out is 1
ANSWERS = [(400, 2), (404, 2), (409, 2), (413, 2), (415, 2), (401, 1), (403, 1), (500, 1), (503, 1), (405, 1)]


class OneAnswer:
    """An API that answers every request with ``status`` and an error body naming a field."""

    def __init__(self) -> None:
        self.status = 400

    async def handle(self, request: web.Request) -> web.Response:
        body = {"error": f"refused with {self.status}", "field": "the_field", "hint": "the hint"}
        return web.json_response(body, status=self.status)


@pytest.fixture
async def served() -> AsyncIterator[tuple[OneAnswer, str]]:
    answer = OneAnswer()
    api = web.Application()
    api.router.add_route("*", "/{tail:.*}", answer.handle)
    server = TestServer(api)
    await server.start_server()
    yield answer, str(server.make_url("")).rstrip("/")
    await server.close()


def _run(*args: str, api: str) -> Result:
    env = {"MYOLO_TOKEN": token(OPERATOR), "MYOLO_API": "", "COLUMNS": "200"}
    return CliRunner().invoke(app, [*args, "--api", api], env=env)


@pytest.mark.parametrize(("status", "code"), ANSWERS)
async def test_the_same_answer_exits_the_same_in_every_command(
    served: tuple[OneAnswer, str], status: int, code: int
) -> None:
    answer, url = served
    answer.status = status
    for command in COMMANDS:
        result = await asyncio.to_thread(_run, *command, api=url)
        assert result.exit_code == code, (command, status, result.output)
        if status != 401:  # a refused token is said in the CLI's own words
            assert f"refused with {status}" in result.output and "(the_field)" in result.output, command
            assert "hint: the hint" in result.output, command


def test_a_bad_api_url_exits_2_and_no_coordinator_exits_1_in_every_command() -> None:
    for command in COMMANDS:
        bad = _run(*command, api="10.0.0.1:8480")
        assert bad.exit_code == REFUSED and "is not an http(s) URL" in bad.output, command
    with refused_port() as port:
        for command in COMMANDS:
            down = _run(*command, api=f"http://127.0.0.1:{port}")
            assert down.exit_code == FAILED and "no coordinator API answered" in down.output, command


def test_each_kind_has_one_exit_code() -> None:
    for kind in (Invalid, NotFound, Conflict, TooLarge, Unsupported):
        assert exit_code(kind("x")) == REFUSED
    assert exit_code(Unavailable("x")) == FAILED
    assert exit_code(Refusal("a 500", status=500)) == FAILED  # of no kind: not carried out
    assert all(code in (FAILED, REFUSED) for code in EXIT_CODE.values())


def test_the_help_lists_the_exit_codes() -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "Exit codes, the same in every command: 0 done; 1 a check or a gate failed" in text
    assert "2 the request is yours to fix" in text
