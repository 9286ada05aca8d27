"""The registry over HTTP: models, their versions (with lineage) and aliases (with their history).

Reads are every coordinator's; writes are the leader's (``NotLeader`` becomes a 307 to it). Who writes is the
caller's token (``operator:<name>``); a ``by`` in a body is refused. Roles: an operator registers versions,
moves aliases (``champion`` included: promoting and rolling back is the operator's everyday decision, and each
move is in the alias's history with who and why, and in the audit log) and edits a model's description. Setting,
changing or clearing a model's retraining template, ``promote_margin`` or ``quantize_margin`` needs an admin: each hands a standing
decision to automation (jobs submitted onto the GPUs on every drift, a champion changed with no one asked), so
it is checked here on the body, beyond the route's operator role.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from aiohttp import web

from myolo.coordinator.api.auth import caller
from myolo.coordinator.api.body import MAX_SMALL_BODY, json_limit, no_query, read_json
from myolo.coordinator.api.respond import json_response
from myolo.coordinator.api.tokens import RANK
from myolo.coordinator.core.errors import Forbidden, Invalid, NotFound
from myolo.coordinator.registry.answers import (
    AliasHistory,
    AliasList,
    ModelList,
    VersionPage,
    alias_answer,
    model_answer,
    version_answer,
)
from myolo.coordinator.registry.api import RegistryRoutes
from myolo.coordinator.registry.errors import UnknownModel
from myolo.coordinator.registry.interface import NewVersion
from myolo.coordinator.registry.records import MAX_MANIFEST_CHARS, AliasRecord, Margin, ModelRecord, RetrainTemplate
from myolo.events.payloads.models import Text

MODELS = "/v1/models"
MODEL = "/v1/models/{model}"
VERSIONS = "/v1/models/{model}/versions"
VERSION = "/v1/models/{model}/versions/{version}"
ALIASES = "/v1/models/{model}/aliases"
ALIAS = "/v1/models/{model}/aliases/{alias}"
HISTORY = "/v1/models/{model}/aliases/{alias}/history"
MAX_REGISTER_BODY = 64 * 1024
MAX_MODEL_BODY = json_limit(MAX_MANIFEST_CHARS)  # a retraining template carries a manifest
DEFAULT_LIMIT, MAX_LIMIT = 100, 1000


class PutModelRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``PUT /v1/models/{model}``: the model as it should be (a field left out is cleared)."""

    description: Text = ""
    retrain: RetrainTemplate | None = None
    promote_margin: Margin | None = None
    quantize_margin: Margin | None = None


class AliasRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    version: Annotated[int, msgspec.Meta(ge=1)]
    reason: Annotated[str, msgspec.Meta(max_length=2000)]


class AliasRemoval(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    reason: Annotated[str, msgspec.Meta(max_length=2000)]


def _number(text: str, field: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise Invalid(f"{field}: {text!r} is not a version number (1, 2, ...)", field=field)
    return int(text)


def _query_int(request: web.Request, name: str, default: int | None, low: int, high: int) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise Invalid(f"{name}: {raw!r} is not a whole number from {low} to {high}", field=name)
    return int(raw)


def _needs_admin(request: web.Request, current: ModelRecord | None, body: PutModelRequest) -> None:
    """Setting, changing or clearing the template or the margin is an admin's (see the module's docstring)."""
    who = caller(request)
    if RANK[who.role] >= RANK["admin"]:
        return
    before = (current.retrain, current.promote_margin, current.quantize_margin) if current else (None, None, None)
    changes = (
        ("retrain", before[0], body.retrain),
        ("promote_margin", before[1], body.promote_margin),
        ("quantize_margin", before[2], body.quantize_margin),
    )
    for field, old, new in changes:
        if old != new:
            raise Forbidden(
                f"changing {field} needs the admin role (it lets the coordinator act on its own: "
                f"{'submit retraining jobs' if field == 'retrain' else 'promote a champion'}); "
                f"token {who.name!r} has {who.role}",
                field=field,
                hint="ask an admin, or send the model's current retrain and margins unchanged",
            )


def routes(reg: RegistryRoutes) -> list[web.RouteDef]:
    def model_of(request: web.Request) -> ModelRecord:
        name = request.match_info["model"]
        record = reg.model(name)
        if record is None:
            raise UnknownModel(name)
        return record

    async def list_models(request: web.Request) -> web.Response:
        return json_response(ModelList(items=[model_answer(reg, m) for m in reg.models()]))

    async def get_model(request: web.Request) -> web.Response:
        return json_response(model_answer(reg, model_of(request)))

    async def put_model(request: web.Request) -> web.Response:
        hint = 'send {"description": "...", "retrain": {...}, "promote_margin": 0.02}'
        body = await read_json(request, PutModelRequest, hint, MAX_MODEL_BODY)
        no_query(request)
        name = request.match_info["model"]
        current = reg.model(name)
        _needs_admin(request, current, body)
        record = await reg.put_model(
            name, body.description, body.retrain, body.promote_margin, caller(request).by,
            quantize_margin=body.quantize_margin,
        )  # fmt: skip
        return json_response(model_answer(reg, record), 201 if current is None else 200)

    async def list_versions(request: web.Request) -> web.Response:
        record = model_of(request)
        limit = _query_int(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT) or DEFAULT_LIMIT
        before = _query_int(request, "before", None, 1, 1 << 62)
        newest = [v for v in reversed(reg.versions(record.name)) if before is None or v.version < before]
        page = newest[:limit]
        more = len(newest) > limit
        return json_response(
            VersionPage(
                items=[version_answer(reg, v) for v in page],
                total=record.latest_version,
                next_before=page[-1].version if more and page else None,
            )
        )

    async def get_version(request: web.Request) -> web.Response:
        record = model_of(request)
        n = _number(request.match_info["version"], "version")
        version = reg.version(record.name, n)
        if version is None:
            raise NotFound(
                f"version: model {record.name} has no version {n} (myoloctl registry versions {record.name} lists them)",
                field="version",
            )
        return json_response(version_answer(reg, version, lineage=True))

    async def register(request: web.Request) -> web.Response:
        hint = 'send {"artifact": "s3://.../model.safetensors", "sha256": "<64 hex>"}'
        new = await read_json(request, NewVersion, hint, MAX_REGISTER_BODY)
        no_query(request)
        name = request.match_info["model"]
        known = reg.registered(name, new)
        version = await reg.register(name, new, caller(request).by)
        path = f"{MODELS}/{name}/versions/{version.version}"
        return json_response(version_answer(reg, version, lineage=True), 200 if known else 201, {"Location": path})

    async def list_aliases(request: web.Request) -> web.Response:
        record = model_of(request)
        return json_response(AliasList(items=[alias_answer(a, history=False) for a in reg.aliases(record.name)]))

    def alias_of(request: web.Request) -> AliasRecord:
        record = model_of(request)
        alias = request.match_info["alias"]
        found = reg.alias(record.name, alias)
        if found is None:
            raise NotFound(
                f"alias: model {record.name} has no alias {alias!r}",
                field="alias",
                hint=f"GET {MODELS}/{record.name}/aliases",
            )
        return found

    async def set_alias(request: web.Request) -> web.Response:
        body = await read_json(request, AliasRequest, 'send {"version": 3, "reason": "why it moves"}', MAX_SMALL_BODY)
        no_query(request)
        record = await reg.set_alias(
            request.match_info["model"], request.match_info["alias"], body.version, caller(request).by, body.reason
        )
        return json_response(alias_answer(record))

    async def remove_alias(request: web.Request) -> web.Response:
        body = await read_json(request, AliasRemoval, 'send {"reason": "why it is removed"}', MAX_SMALL_BODY)
        no_query(request)
        record = await reg.set_alias(
            request.match_info["model"], request.match_info["alias"], None, caller(request).by, body.reason
        )
        return json_response(alias_answer(record))

    async def alias_history(request: web.Request) -> web.Response:
        record = alias_of(request)
        raw_at = request.query.get("at")
        at = None
        if raw_at is not None:
            try:
                at = float(raw_at)
            except ValueError:
                raise Invalid(f"at: {raw_at!r} is not a time (seconds since the epoch)", field="at") from None
        answer = alias_answer(record, newest_first=True)
        version_at = record.version_at(at) if at is not None else None
        return json_response(AliasHistory(**msgspec.structs.asdict(answer), at=at, version_at=version_at))

    return [
        web.get(MODELS, list_models),
        web.get(MODEL, get_model),
        web.put(MODEL, put_model),
        web.get(VERSIONS, list_versions),
        web.post(VERSIONS, register),
        web.get(VERSION, get_version),
        web.get(ALIASES, list_aliases),
        web.put(ALIAS, set_alias),
        web.delete(ALIAS, remove_alias),
        web.get(HISTORY, alias_history),
    ]
