"""Node identity on the local stack: each agent's key made before it starts, and enrolled as an admin does.

The coordinators refuse a node's faults, acks and training events until its public key is enrolled, so the
stack makes each agent's Ed25519 key in its data dir (where the agent looks for it) before launching it, and
enrols every agent's ``node.key.pub`` through the coordinators' API with the stack's admin token once a
leader answers. :func:`enroll_nodes` is also what ``myoloctl node enroll`` and the tests call.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from myolo.common.keys import ensure_ed25519
from myolo.coordinator.cli.auth import Token
from myolo.coordinator.cli.client import ApiClient
from myolo.coordinator.core.errors import Unavailable

NODE_KEY = "node.key"  # the agent's default [identity] key_file, in its data dir
PUBLIC_KEY = "node.key.pub"


def key_path(node_id: str) -> str:
    """The API route of a node's enrolled key."""
    return f"/v1/nodes/{quote(node_id, safe='')}/key"


def make_node_key(data_dir: Path) -> None:
    """The agent's key pair in ``data_dir`` (made 0600 if missing, as the agent itself would)."""
    ensure_ed25519(data_dir / NODE_KEY, "identity.key_file")


def enroll_nodes(client: ApiClient, keys: Mapping[str, str]) -> dict[str, str]:
    """Enrol each node's public key (PEM) through the API; returns what changed per node (``enrolled``,
    ``replaced``, ``unchanged``). Raises the first ``Refusal``."""
    return {node: client.put(key_path(node), {"public_key": pem})["change"] for node, pem in keys.items()}


def agent_public_keys(data_dirs: Mapping[str, Path]) -> dict[str, str]:
    """``{node id: PEM}`` from each agent's ``<data_dir>/node.key.pub`` (the agent writes it at its first start)."""
    return {node: (Path(d) / PUBLIC_KEY).read_text() for node, d in data_dirs.items()}


def enroll_agents(api_urls: list[str], data_dirs: Mapping[str, Path], token: str | None, timeout: float) -> dict:
    """Enrol every agent of ``data_dirs`` through ``api_urls`` (a standby redirects to the leader), retrying
    while no leader is known; a ``Refusal`` for a refusal or when none leads within ``timeout``."""
    keys = agent_public_keys(data_dirs)
    client = ApiClient(api_urls, timeout=5.0, token=Token(token, "the local stack's admin.token") if token else None)
    deadline = time.monotonic() + timeout
    while True:
        try:
            return enroll_nodes(client, keys)
        except Unavailable:  # no coordinator answered, no leader yet, leadership moving: one comes within seconds
            if time.monotonic() > deadline:
                raise
        time.sleep(0.25)
