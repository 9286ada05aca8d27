"""Drift over HTTP: every watched version's latest statistics, one model's full view, its references and rule.

A reference is sent one feature per request (``PUT .../references/{feature}``), so a request stays under the
API's body limit whatever the number of features; ``myoloctl drift baseline set`` sends them in turn.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from aiohttp import web

from myolo.coordinator.api.auth import caller
from myolo.coordinator.api.body import read_json
from myolo.coordinator.api.respond import json_response
from myolo.coordinator.core.errors import Invalid
from myolo.coordinator.drift.answers import RuleReset, StatusList
from myolo.coordinator.drift.api import DriftAPI
from myolo.coordinator.drift.reference import CategoricalReference, NumericReference
from myolo.coordinator.drift.rule import DriftRule

LIST_PATH = "/v1/drift"
MODEL_PATH = "/v1/drift/{model}"
REFERENCE_PATH = "/v1/drift/{model}/references/{feature}"
RULE_PATH = "/v1/drift/{model}/rule"
_REF_HINT = 'send {"version": "7" or null (the champion), "source": "file:ref.csv", "numeric": {...}} or "categorical"'


class ReferenceBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Body of ``PUT /v1/drift/{model}/references/{feature}``: exactly one of ``numeric`` and ``categorical``."""

    version: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None
    source: Annotated[str, msgspec.Meta(min_length=1, max_length=256)] = "api"
    numeric: NumericReference | None = None
    categorical: CategoricalReference | None = None


def routes(drift: DriftAPI) -> list[web.RouteDef]:
    async def listing(request: web.Request) -> web.Response:
        return json_response(StatusList(items=list(drift.summary())))

    async def one(request: web.Request) -> web.Response:
        model = request.match_info["model"]
        return json_response(drift.view(model))

    async def reference(request: web.Request) -> web.Response:
        model, feature = request.match_info["model"], request.match_info["feature"]
        body = await read_json(request, ReferenceBody, _REF_HINT)
        given = [r for r in (body.numeric, body.categorical) if r is not None]
        if len(given) != 1:
            raise Invalid("give exactly one of numeric and categorical", field="numeric", hint=_REF_HINT)
        rec = await drift.set_reference(model, body.version, feature, given[0], body.source, caller(request).by)
        return json_response(rec)

    async def put_rule(request: web.Request) -> web.Response:
        model = request.match_info["model"]
        rule = await read_json(request, DriftRule, "send the whole rule: GET /v1/drift/{model} shows it")
        rec = await drift.set_rule(model, rule, caller(request).by)
        return json_response(rec)

    async def reset_rule(request: web.Request) -> web.Response:
        model = request.match_info["model"]
        await drift.set_rule(model, None, caller(request).by)
        return json_response(RuleReset(model=model))

    return [
        web.get(LIST_PATH, listing),
        web.get(MODEL_PATH, one),
        web.put(REFERENCE_PATH, reference),
        web.put(RULE_PATH, put_rule),
        web.delete(RULE_PATH, reset_rule),
    ]
