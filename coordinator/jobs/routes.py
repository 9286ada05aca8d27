"""The jobs' HTTP routes: list and read jobs (every coordinator), apply, scale and delete (the leader).

A job is answered as its whole state record (``JobRecord``: spec, phase, generation with its members,
progress, decisions), the same shape ``myoloctl`` renders and ``-o json`` prints. A manifest may come as
YAML (``Content-Type: application/yaml``, as ``curl --data-binary @job.yaml`` sends it with that header; not
``text/plain``, which a browser may send across origins unasked) or wrapped in JSON (``{"manifest": "..."}``,
as ``myoloctl apply`` sends it); its body is bounded before it is parsed. Who applies, scales or deletes is the
caller's token (``operator:<token name>``); a ``by`` in the body or query is refused. A write on a standby
raises ``NotLeader``, which the API's middleware answers with a 307 to the leader.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import msgspec
from aiohttp import web

from coordinator.api.audit import set_target
from coordinator.api.auth import caller
from coordinator.api.errors import ApiError
from coordinator.api.request import MAX_SMALL_BODY, decode_json, no_query, read_bounded
from coordinator.jobs.interface import JobConflict, JobsAPI, UnknownJob
from coordinator.jobs.manifest import MAX_JSON_MANIFEST_BODY, MAX_MANIFEST_BYTES, ManifestError
from coordinator.jobs.records import JobRecord

OPENAPI = Path(__file__).with_name("openapi.yaml")
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"})
JSON = "application/json"
APPLY = ("POST", "/v1/jobs")
BODY_TYPES = {APPLY: YAML_TYPES | {JSON}}  # the API's gate lets these through to the route (RouteSet.body_types)


class ApplyRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``POST /v1/jobs`` as JSON: the manifest's text."""

    manifest: str


class ScaleRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    replicas: Annotated[int, msgspec.Meta(ge=0, le=4096)]


class DeleteRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``DELETE /v1/jobs/{name}``: an empty JSON object (or no body)."""


def job_response(record: JobRecord, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """The record as JSON (msgspec writes a NaN loss as null, which strict JSON readers accept)."""
    return web.Response(
        body=msgspec.json.encode(record), status=status, content_type="application/json", headers=headers
    )


def unknown_job(name: str) -> ApiError:
    return ApiError(404, f"job {name!r} is not known", field="name", hint="list the jobs with GET /v1/jobs")


async def manifest_request(request: web.Request) -> str:
    """The manifest text of ``POST /v1/jobs``, from a YAML or a JSON body."""
    no_query(request)
    if request.content_type == JSON:
        raw = await read_bounded(request, MAX_JSON_MANIFEST_BODY, "request body")
        body = decode_json(raw, ApplyRequest, 'send {"manifest": "<the YAML>"}')
        if len(body.manifest.encode()) > MAX_MANIFEST_BYTES:
            raise ApiError(413, f"the manifest is over {MAX_MANIFEST_BYTES} bytes", field="manifest")
        return body.manifest
    if request.content_type not in YAML_TYPES:
        raise ApiError(
            415,
            f"a manifest cannot be sent as {request.content_type}",
            field="Content-Type",
            hint='send the YAML with Content-Type: application/yaml, or JSON {"manifest": ...}',
        )
    raw = await read_bounded(request, MAX_MANIFEST_BYTES, "manifest")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"the manifest is not UTF-8: {exc}", field="manifest") from None
    return text


@contextmanager
def refusals(value_field: str | None = None) -> Iterator[None]:
    """The jobs component's refusals as API errors; with ``value_field``, a ValueError is that field's fault."""
    try:
        yield
    except UnknownJob as exc:
        raise unknown_job(exc.name) from None
    except ManifestError as exc:
        hint = "fix the manifest and apply it again (myoloctl apply checks it before sending)"
        raise ApiError(400, str(exc), field=exc.field or "manifest", hint=hint) from None
    except JobConflict as exc:
        hint = "a running job keeps this field; delete the job and apply it again to change it"
        raise ApiError(409, str(exc), field=exc.field, hint=hint) from None
    except ValueError as exc:
        if value_field is None:
            raise
        raise ApiError(400, str(exc), field=value_field) from None


def routes(jobs: JobsAPI) -> list[web.RouteDef]:
    async def list_jobs(request: web.Request) -> web.Response:
        items = sorted(jobs.jobs(), key=lambda r: r.name)
        return web.Response(body=msgspec.json.encode({"items": items}), content_type="application/json")

    async def get_job(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        record = jobs.job(name)
        if record is None:
            raise unknown_job(name)
        return job_response(record)

    async def apply(request: web.Request) -> web.Response:
        manifest = await manifest_request(request)
        with refusals():
            record, created = await jobs.apply(manifest, caller(request).by)
        set_target(request, record.name)
        if created:
            return job_response(record, 201, {"Location": f"/v1/jobs/{record.name}"})
        return job_response(record)

    async def scale(request: web.Request) -> web.Response:
        raw = await read_bounded(request, MAX_SMALL_BODY, "request body")
        no_query(request)
        body = decode_json(raw, ScaleRequest, 'send {"replicas": 3}; the only field is replicas')
        with refusals("replicas"):
            record = await jobs.scale(request.match_info["name"], body.replicas, caller(request).by)
        return job_response(record)

    async def delete(request: web.Request) -> web.Response:
        raw = await read_bounded(request, MAX_SMALL_BODY, "request body")
        no_query(request)
        decode_json(raw, DeleteRequest, "send {} (or nothing) with Content-Type: application/json")
        with refusals():
            record = await jobs.delete(request.match_info["name"], caller(request).by)
        return job_response(record, 202)

    return [
        web.get("/v1/jobs", list_jobs),
        web.post("/v1/jobs", apply),
        web.get("/v1/jobs/{name}", get_job),
        web.delete("/v1/jobs/{name}", delete),
        web.post("/v1/jobs/{name}/scale", scale),
    ]
