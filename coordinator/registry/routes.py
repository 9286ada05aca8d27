"""The registry over HTTP: models, their versions (with lineage) and aliases (with their history).

Reads are every coordinator's; writes are the leader's (``NotLeader`` becomes a 307 to it). Who writes is the
caller's token (``operator:<name>``); a ``by`` in a body is refused. Roles: an operator registers versions,
moves aliases (``champion`` included: promoting and rolling back is the operator's everyday decision, and each
move is in the alias's history with who and why, and in the audit log) and edits a model's description. Setting,
changing or clearing a model's retraining template or ``promote_margin`` needs an admin: each hands a standing
decision to automation (jobs submitted onto the GPUs on every drift, a champion changed with no one asked), so
it is checked here on the body, beyond the route's operator role.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import msgspec
from aiohttp import web

from coordinator.api.auth import caller
from coordinator.api.errors import ApiError
from coordinator.api.request import MAX_SMALL_BODY, decode_json, no_query, read_bounded
from coordinator.api.tokens import RANK
from coordinator.jobs.interface import MAX_JSON_MANIFEST_BODY
from coordinator.registry.answers import (
    AliasHistory,
    AliasList,
    ModelList,
    VersionPage,
    alias_answer,
    model_answer,
    version_answer,
)
from coordinator.registry.errors import RegistryError, RegistryFull, UnknownAlias, UnknownModel, UnknownVersion
from coordinator.registry.interface import ModelRegistry, NewVersion
from coordinator.registry.records import AliasRecord, Margin, ModelRecord, RetrainTemplate
from events.payloads.models import Text

MODELS = "/v1/models"
MODEL = "/v1/models/{model}"
VERSIONS = "/v1/models/{model}/versions"
VERSION = "/v1/models/{model}/versions/{version}"
ALIASES = "/v1/models/{model}/aliases"
ALIAS = "/v1/models/{model}/aliases/{alias}"
HISTORY = "/v1/models/{model}/aliases/{alias}/history"
MAX_REGISTER_BODY = 64 * 1024
DEFAULT_LIMIT, MAX_LIMIT = 100, 1000


class PutModelRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``PUT /v1/models/{model}``: the model as it should be (a field left out is cleared)."""

    description: Text = ""
    retrain: RetrainTemplate | None = None
    promote_margin: Margin | None = None


class AliasRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    version: Annotated[int, msgspec.Meta(ge=1)]
    reason: Annotated[str, msgspec.Meta(max_length=2000)]


class AliasRemoval(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    reason: Annotated[str, msgspec.Meta(max_length=2000)]


def _json(body: msgspec.Struct, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=msgspec.json.encode(body), status=status, content_type="application/json", headers=headers)


def _unknown_model(name: str) -> ApiError:
    return ApiError(404, f"model {name!r} is not registered", field="model", hint="list them with GET /v1/models")


@contextmanager
def refusals() -> Iterator[None]:
    """The registry's refusals as API errors naming the field."""
    try:
        yield
    except RegistryFull as exc:
        raise ApiError(409, str(exc), field=exc.field, hint="see the [registry] section's bounds") from None
    except RegistryError as exc:
        raise ApiError(400, str(exc), field=exc.field) from None
    except UnknownModel as exc:
        raise _unknown_model(exc.model) from None
    except UnknownAlias as exc:
        raise ApiError(404, str(exc), field="alias") from None
    except UnknownVersion as exc:  # a version named in the body
        raise ApiError(400, str(exc), field=exc.field, hint=f"GET /v1/models/{exc.model}/versions lists them") from None


def _number(text: str, field: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ApiError(400, f"{field}: {text!r} is not a version number (1, 2, ...)", field=field)
    return int(text)


def _query_int(request: web.Request, name: str, default: int | None, low: int, high: int) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ApiError(400, f"{name}: {raw!r} is not a whole number from {low} to {high}", field=name)
    return int(raw)


def _needs_admin(request: web.Request, current: ModelRecord | None, body: PutModelRequest) -> None:
    """Setting, changing or clearing the template or the margin is an admin's (see the module's docstring)."""
    who = caller(request)
    if RANK[who.role] >= RANK["admin"]:
        return
    before = (current.retrain, current.promote_margin) if current is not None else (None, None)
    for field, old, new in (("retrain", before[0], body.retrain), ("promote_margin", before[1], body.promote_margin)):
        if old != new:
            raise ApiError(
                403,
                f"changing {field} needs the admin role (it lets the coordinator act on its own: "
                f"{'submit retraining jobs' if field == 'retrain' else 'promote a champion'}); "
                f"token {who.name!r} has {who.role}",
                field=field,
                hint="ask an admin, or send the model's current retrain and promote_margin unchanged",
            )


def routes(reg: ModelRegistry) -> list[web.RouteDef]:
    def model_of(request: web.Request) -> ModelRecord:
        name = request.match_info["model"]
        record = reg.model(name)
        if record is None:
            raise _unknown_model(name)
        return record

    async def list_models(request: web.Request) -> web.Response:
        return _json(ModelList(items=[model_answer(reg, m) for m in reg.models()]))

    async def get_model(request: web.Request) -> web.Response:
        return _json(model_answer(reg, model_of(request)))

    async def put_model(request: web.Request) -> web.Response:
        raw = await read_bounded(request, MAX_JSON_MANIFEST_BODY, "request body")
        no_query(request)
        body = decode_json(
            raw, PutModelRequest, 'send {"description": "...", "retrain": {...}, "promote_margin": 0.02}'
        )
        name = request.match_info["model"]
        current = reg.model(name)
        _needs_admin(request, current, body)
        with refusals():
            record = await reg.put_model(name, body.description, body.retrain, body.promote_margin, caller(request).by)
        return _json(model_answer(reg, record), 201 if current is None else 200)

    async def list_versions(request: web.Request) -> web.Response:
        record = model_of(request)
        limit = _query_int(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT) or DEFAULT_LIMIT
        before = _query_int(request, "before", None, 1, 1 << 62)
        newest = [v for v in reversed(reg.versions(record.name)) if before is None or v.version < before]
        page = newest[:limit]
        more = len(newest) > limit
        return _json(
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
            raise ApiError(
                404,
                f"version: model {record.name} has no version {n} (myoloctl registry versions {record.name} lists them)",
                field="version",
            )
        return _json(version_answer(reg, version, lineage=True))

    async def register(request: web.Request) -> web.Response:
        raw = await read_bounded(request, MAX_REGISTER_BODY, "request body")
        no_query(request)
        new = decode_json(raw, NewVersion, 'send {"artifact": "s3://.../model.safetensors", "sha256": "<64 hex>"}')
        name = request.match_info["model"]
        known = reg.registered(name, new)
        with refusals():
            version = await reg.register(name, new, caller(request).by)
        path = f"{MODELS}/{name}/versions/{version.version}"
        return _json(version_answer(reg, version, lineage=True), 200 if known else 201, {"Location": path})

    async def list_aliases(request: web.Request) -> web.Response:
        record = model_of(request)
        return _json(AliasList(items=[alias_answer(a, history=False) for a in reg.aliases(record.name)]))

    def alias_of(request: web.Request) -> AliasRecord:
        record = model_of(request)
        alias = request.match_info["alias"]
        found = reg.alias(record.name, alias)
        if found is None:
            raise ApiError(
                404,
                f"alias: model {record.name} has no alias {alias!r}",
                field="alias",
                hint=f"GET {MODELS}/{record.name}/aliases",
            )
        return found

    async def set_alias(request: web.Request) -> web.Response:
        raw = await read_bounded(request, MAX_SMALL_BODY, "request body")
        no_query(request)
        body = decode_json(raw, AliasRequest, 'send {"version": 3, "reason": "why it moves"}')
        with refusals():
            record = await reg.set_alias(
                request.match_info["model"], request.match_info["alias"], body.version, caller(request).by, body.reason
            )
        return _json(alias_answer(record))

    async def remove_alias(request: web.Request) -> web.Response:
        raw = await read_bounded(request, MAX_SMALL_BODY, "request body")
        no_query(request)
        body = decode_json(raw, AliasRemoval, 'send {"reason": "why it is removed"}')
        with refusals():
            record = await reg.set_alias(
                request.match_info["model"], request.match_info["alias"], None, caller(request).by, body.reason
            )
        return _json(alias_answer(record))

    async def alias_history(request: web.Request) -> web.Response:
        record = alias_of(request)
        raw_at = request.query.get("at")
        at = None
        if raw_at is not None:
            try:
                at = float(raw_at)
            except ValueError:
                raise ApiError(400, f"at: {raw_at!r} is not a time (seconds since the epoch)", field="at") from None
        answer = alias_answer(record, newest_first=True)
        version_at = record.version_at(at) if at is not None else None
        return _json(AliasHistory(**msgspec.structs.asdict(answer), at=at, version_at=version_at))

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
