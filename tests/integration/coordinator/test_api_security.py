"""The coordinator's API knows who is calling: a real ``myolo-coordinator run`` process, a real agent, the real
broker. No token is a 401, a viewer's cordon a 403 naming the role, an operator's cordon (through myoloctl)
works and is recorded under the token's name, an admin-only route needs an admin, a ``by`` in the body is
refused, every write is on ``myolo.audit`` (read back from Kafka), a revoked token stops working without a
restart; and the API over TLS, trusted by ``myoloctl --ca-file``."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from typer.testing import CliRunner

from myolo.coordinator.cli.main import app
from myolo.events.codec import decode
from myolo.events.payloads import AuditRecord
from myolo.events.settings import KafkaSettings
from myolo.events.topics import AUDIT
from tests.support.api_auth import ADMIN, OPERATOR, VIEWER, write_tokens
from tests.support.coordinator.procs import Procs, start_coordinator, status
from tests.support.helpers import read_topic, wait_until
from tests.support.tls_certs import make_certs


def myoloctl(*args: str, token: str | None = None, **env: str):
    """myoloctl in-process (run in a thread: it is synchronous and the coordinator answers meanwhile)."""
    environ = {"MYOLO_API": "", "MYOLO_TOKEN": token or "", "MYOLO_CA_FILE": "", **env}
    return CliRunner().invoke(app, list(args), env=environ)


async def call(
    method: str, url: str, token: str | None = None, json_body: Any = None, ssl: Any = None
) -> tuple[int, dict, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, url, json=json_body, headers=headers, ssl=ssl) as resp,
    ):
        return resp.status, dict(resp.headers), await resp.json()


async def audit_records(settings: KafkaSettings, coordinator: str) -> list[AuditRecord]:
    records = []
    for r in await read_topic(settings, AUDIT):
        event = decode(r.value, r.headers, r.key)
        assert event.type == "ai.myolo.audit.v1" and r.key == event.data.who.encode()  # keyed by the caller
        if event.data.coordinator == coordinator:
            records.append(event.data)
    return records


async def test_the_api_knows_who_is_calling(kafka, settings, tmp_path: Path) -> None:
    tokens_file = tmp_path / "api-tokens"
    tokens = write_tokens(tokens_file)
    procs = Procs(tmp_path)
    node = f"sec-{uuid.uuid4().hex[:6]}"
    try:
        status_file = start_coordinator(procs, tmp_path, kafka.bootstrap, f'tokens_file = "{tokens_file}"', name="sec")
        procs.start_agent(node, node, kafka.bootstrap, tmp_path / node)
        await wait_until(lambda: (status(status_file) or {}).get("is_leader"), 90, "a leading coordinator")
        st = status(status_file)
        url, me = st["api_url"], st["instance_id"]

        async def node_listed() -> bool:
            code, _, body = await call("GET", f"{url}/v1/nodes", tokens[VIEWER])
            return code == 200 and any(n["node_id"] == node for n in body["items"])

        await wait_until(node_listed, 60, "the agent's node in the fleet view", every=0.5)

        # no token, or a wrong one: 401 with a Bearer challenge; /healthz stays open for probes
        code, headers, body = await call("GET", f"{url}/v1/nodes")
        assert code == 401 and headers["WWW-Authenticate"].startswith("Bearer") and body["field"] == "Authorization"
        code, headers, _ = await call("POST", f"{url}/v1/nodes/{node}/cordon", "myolo_forged", {})
        assert code == 401 and 'error="invalid_token"' in headers["WWW-Authenticate"]
        assert (await call("GET", f"{url}/healthz"))[0] == 200

        # a viewer reads, and may not cordon: 403 naming the role
        code, _, body = await call("POST", f"{url}/v1/nodes/{node}/cordon", tokens[VIEWER], {"reason": "x"})
        assert code == 403 and "needs the operator role" in body["error"], body

        # an operator cordons through myoloctl: recorded under the token's name, whatever the host or user
        result = await asyncio.to_thread(
            myoloctl, "cordon", node, "--reason", "fan noise", "--api", url, token=tokens[OPERATOR]
        )
        assert result.exit_code == 0, result.output
        assert f"recorded by operator:{OPERATOR}" in result.output
        code, _, body = await call("GET", f"{url}/v1/nodes/{node}", tokens[VIEWER])
        assert body["cordon"]["by"] == f"operator:{OPERATOR}" and body["cordoned"] is True

        # naming someone else is refused, not ignored
        code, _, body = await call("POST", f"{url}/v1/nodes/{node}/uncordon", tokens[OPERATOR], {"by": ADMIN})
        assert code == 400 and body["field"] == "by"

        # an admin-only route (the nodes component's key list)
        assert (await call("GET", f"{url}/v1/node-keys", tokens[OPERATOR]))[0] == 403
        assert (await call("GET", f"{url}/v1/node-keys", tokens[ADMIN]))[0] == 200

        # every write is on myolo.audit, read back from Kafka: who, role, what, outcome, from where
        async def audited() -> list[AuditRecord]:
            return [r for r in await audit_records(settings, me) if r.target == node]

        await wait_until(lambda: _count(audited, 5), 30, "the audit records on Kafka", every=0.5)
        got = await audited()  # in order per caller: the topic is keyed by who, one partition each
        vic = [(r.role, r.outcome, r.status) for r in got if r.who == VIEWER]
        assert vic == [("viewer", "refused", 403)]
        olive = [r for r in got if r.who == OPERATOR]
        assert [(r.role, r.outcome, r.status) for r in olive] == [
            ("operator", "attempt", None),
            ("operator", "done", 200),
            ("operator", "attempt", None),
            ("operator", "refused", 400),
        ]
        cordon = olive[1]
        assert (cordon.method, cordon.path, cordon.route) == (
            "POST",
            f"/v1/nodes/{node}/cordon",
            "/v1/nodes/{node_id}/cordon",
        )
        assert cordon.remote == "127.0.0.1" and cordon.request_id == olive[0].request_id and cordon.time > 0
        assert "by is not accepted" in olive[3].error

        # revoked: refused from the next request on, without a restart
        revoked = await asyncio.to_thread(myoloctl, "token", "revoke", OPERATOR, "--tokens-file", str(tokens_file))
        assert revoked.exit_code == 0, revoked.output
        assert (await call("GET", f"{url}/v1/nodes", tokens[OPERATOR]))[0] == 401
        after = await asyncio.to_thread(myoloctl, "uncordon", node, "--api", url, token=tokens[OPERATOR])
        assert after.exit_code == 1 and "the token from MYOLO_TOKEN was refused" in after.output
        assert (await call("GET", f"{url}/v1/nodes", tokens[VIEWER]))[0] == 200
    finally:
        procs.stop_all()


async def _count(records, n: int) -> bool:
    return len(await records()) >= n


async def test_the_api_over_tls_is_trusted_with_ca_file(kafka, tmp_path: Path) -> None:
    tokens_file = tmp_path / "api-tokens"
    tokens = write_tokens(tokens_file)
    certs = make_certs(tmp_path / "tls")
    procs = Procs(tmp_path)
    try:
        tls = f'tls_cert_file = "{certs.cert}"\ntls_key_file = "{certs.key}"\n'
        api = f'tokens_file = "{tokens_file}"\n{tls}'
        status_file = start_coordinator(procs, tmp_path, kafka.bootstrap, api, name="sec")
        await wait_until(lambda: (status(status_file) or {}).get("is_leader"), 90, "a leading coordinator")
        url = status(status_file)["api_url"]
        assert url.startswith("https://127.0.0.1:"), url

        trusted = await asyncio.to_thread(
            myoloctl, "--ca-file", str(certs.ca), "get", "nodes", "-o", "json", "--api", url, token=tokens[VIEWER]
        )
        assert trusted.exit_code == 0, trusted.output
        assert isinstance(json.loads(trusted.output)["items"], list)  # the shared broker may hold nodes of others
        untrusted = await asyncio.to_thread(myoloctl, "get", "nodes", "--api", url, token=tokens[VIEWER])
        assert untrusted.exit_code == 1 and "TLS certificate is not trusted" in untrusted.output
        # plain HTTP on the TLS port gets nowhere
        plain = url.replace("https://", "http://")
        nothing = await asyncio.to_thread(myoloctl, "get", "nodes", "--api", plain, token=tokens[VIEWER])
        assert nothing.exit_code != 0
    finally:
        procs.stop_all()
