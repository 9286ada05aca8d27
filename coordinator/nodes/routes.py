"""Node keys over HTTP, for admins only: enrol (``PUT``), read, revoke (``DELETE``) a node's key, list them.

Writes are the leader's: on a standby ``NotLeader`` becomes a 307 to the leader (the API's middleware).
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from aiohttp import web

from myolo.common.errors import ConfigError
from myolo.common.keys import MAX_KEY_FILE_BYTES
from myolo.coordinator.api.auth import caller
from myolo.coordinator.api.body import read_json
from myolo.coordinator.api.respond import json_response
from myolo.coordinator.core.errors import Invalid
from myolo.coordinator.nodes.answers import NodeKeyList, key_answer
from myolo.coordinator.nodes.api import NodeKeys
from myolo.coordinator.nodes.interface import NotEnrolled

KEY_PATH = "/v1/nodes/{node_id}/key"
LIST_PATH = "/v1/node-keys"
ADMIN_ROUTES = (("PUT", KEY_PATH), ("GET", KEY_PATH), ("DELETE", KEY_PATH), ("GET", LIST_PATH))
_HINT = 'send {"public_key": "<PEM>"}: the node\'s <data_dir>/node.key.pub (`myolo-agent key show` prints it)'


class EnrollRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Body of ``PUT /v1/nodes/{node_id}/key``: the node's Ed25519 public key, PEM."""

    public_key: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_KEY_FILE_BYTES)]


def routes(nodes: NodeKeys) -> list[web.RouteDef]:
    async def enroll(request: web.Request) -> web.Response:
        node_id = request.match_info["node_id"]
        body = await read_json(request, EnrollRequest, _HINT)
        try:
            record, change = await nodes.enroll(node_id, body.public_key, caller(request).by)
        except ConfigError as exc:
            raise Invalid(f"public_key: {exc.reason}", field="public_key", hint=_HINT) from None
        return json_response(key_answer(record, change), 201 if change == "enrolled" else 200)

    async def read(request: web.Request) -> web.Response:
        node_id = request.match_info["node_id"]
        record = nodes.key_of(node_id)
        if record is None:
            raise NotEnrolled(node_id)
        return json_response(key_answer(record))

    async def revoke(request: web.Request) -> web.Response:
        node_id = request.match_info["node_id"]
        record = await nodes.revoke(node_id, caller(request).by)
        return json_response(key_answer(record))

    async def listing(request: web.Request) -> web.Response:
        return json_response(NodeKeyList(items=[key_answer(r) for r in nodes.key_records()]))

    return [  # no HEAD twins: every route here is an admin's, and a HEAD would tell a viewer who is enrolled
        web.put(KEY_PATH, enroll),
        web.get(KEY_PATH, read, allow_head=False),
        web.delete(KEY_PATH, revoke),
        web.get(LIST_PATH, listing, allow_head=False),
    ]
