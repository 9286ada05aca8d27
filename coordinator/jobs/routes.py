"""The jobs' HTTP routes: list and read jobs (every coordinator), apply, scale, delete and profile (the leader).

A job is answered as its whole state record, spec and status side by side (``JobAnswer``: spec, phase,
generation with its members, progress, decisions), the same shape ``myoloctl`` renders and ``-o json`` prints. A manifest may come as
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

from myolo.coordinator.api.audit import set_target
from myolo.coordinator.api.auth import caller
from myolo.coordinator.api.body import MAX_SMALL_BODY, decode_body, json_limit, no_query, read_bounded, read_json
from myolo.coordinator.api.respond import json_response
from myolo.coordinator.core.errors import Invalid, TooLarge, Unsupported
from myolo.coordinator.jobs.answers import JobList, job_answer
from myolo.coordinator.jobs.api import JobsRoutes
from myolo.coordinator.jobs.interface import UnknownJob
from myolo.coordinator.jobs.manifest import MAX_MANIFEST_BYTES
from myolo.coordinator.jobs.nccl import NcclView
from myolo.coordinator.jobs.profile import ProfileRequest
from myolo.coordinator.jobs.records import JobRecord

OPENAPI = Path(__file__).with_name("openapi.yaml")
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"})
JSON = "application/json"
APPLY = ("POST", "/v1/jobs")
BODY_TYPES = {APPLY: YAML_TYPES | {JSON}}  # the API's gate lets these through to the route (RouteSet.body_types)
MAX_JSON_MANIFEST_BODY = json_limit(MAX_MANIFEST_BYTES)  # a manifest wrapped in JSON


class ApplyRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``POST /v1/jobs`` as JSON: the manifest's text."""

    manifest: str


class ScaleRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    replicas: Annotated[int, msgspec.Meta(ge=0, le=4096)]


class DeleteRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``DELETE /v1/jobs/{name}``: an empty JSON object (or no body)."""


def job_response(
    record: JobRecord, status: int = 200, headers: dict[str, str] | None = None, nccl: NcclView | None = None
) -> web.Response:
    """The record as JSON (msgspec writes a NaN loss as null, which strict JSON readers accept)."""
    return json_response(job_answer(record, nccl), status, headers)


async def manifest_request(request: web.Request) -> str:
    """The manifest text of ``POST /v1/jobs``, from a YAML or a JSON body."""
    no_query(request)
    if request.content_type == JSON:
        raw = await read_bounded(request, MAX_JSON_MANIFEST_BODY)
        body = decode_body(raw, ApplyRequest, 'send {"manifest": "<the YAML>"}')
        if len(body.manifest.encode()) > MAX_MANIFEST_BYTES:
            raise TooLarge(f"the manifest is over {MAX_MANIFEST_BYTES} bytes", field="manifest")
        return body.manifest
    if request.content_type not in YAML_TYPES:
        raise Unsupported(
            f"a manifest cannot be sent as {request.content_type}",
            field="Content-Type",
            hint='send the YAML with Content-Type: application/yaml, or JSON {"manifest": ...}',
        )
    raw = await read_bounded(request, MAX_MANIFEST_BYTES, "manifest")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Invalid(f"the manifest is not UTF-8: {exc}", field="manifest") from None
    return text


@contextmanager
def value_of(field: str) -> Iterator[None]:
    """A plain ValueError of the jobs component (a bound a value passes) is ``field``'s fault."""
    try:
        yield
    except Invalid:
        raise
    except ValueError as exc:
        raise Invalid(str(exc), field=field) from None


def routes(jobs: JobsRoutes) -> list[web.RouteDef]:
    async def list_jobs(request: web.Request) -> web.Response:
        items = [job_answer(r) for r in sorted(jobs.jobs(), key=lambda r: r.name)]
        return json_response(JobList(items=items))

    async def get_job(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        record = jobs.job(name)
        if record is None:
            raise UnknownJob(name)
        return job_response(record, nccl=jobs.nccl(name))

    async def apply(request: web.Request) -> web.Response:
        manifest = await manifest_request(request)
        record, created = await jobs.apply(manifest, caller(request).by)
        set_target(request, record.name)
        if created:
            return job_response(record, 201, {"Location": f"/v1/jobs/{record.name}"})
        return job_response(record)

    async def scale(request: web.Request) -> web.Response:
        body = await read_json(
            request, ScaleRequest, 'send {"replicas": 3}; the only field is replicas', MAX_SMALL_BODY
        )
        no_query(request)
        with value_of("replicas"):
            record = await jobs.scale(request.match_info["name"], body.replicas, caller(request).by)
        return job_response(record)

    async def delete(request: web.Request) -> web.Response:
        await read_json(
            request, DeleteRequest, "send {} (or nothing) with Content-Type: application/json", MAX_SMALL_BODY
        )
        no_query(request)
        record = await jobs.delete(request.match_info["name"], caller(request).by)
        return job_response(record, 202)

    async def profile(request: web.Request) -> web.Response:
        body = await read_json(request, ProfileRequest, 'send {"rank": 0, "duration_s": 300}', MAX_SMALL_BODY)
        no_query(request)
        started = await jobs.profile(request.match_info["name"], body, caller(request).by)
        set_target(request, request.match_info["name"])
        return json_response(started, 202)

    return [
        web.get("/v1/jobs", list_jobs),
        web.post("/v1/jobs/{name}/profile", profile),
        web.post("/v1/jobs", apply),
        web.get("/v1/jobs/{name}", get_job),
        web.delete("/v1/jobs/{name}", delete),
        web.post("/v1/jobs/{name}/scale", scale),
    ]
