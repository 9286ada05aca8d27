"""Ask a local process's HTTP health endpoint how it is (coordinator API or agent health server)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def get_json(url: str, timeout: float = 1.0, token: str | None = None) -> tuple[int, Any] | None:
    """(status, parsed body) of a GET, the body of an error status included; None if nothing answered. ``token``:
    the API token to send (every coordinator route but /healthz needs one)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"null")
        except ValueError:
            return exc.code, None
    except (OSError, ValueError):
        return None


def coordinator_health(api_url: str) -> str:
    """'leader', 'standby', 'starting' or 'no answer'."""
    answer = get_json(f"{api_url}/healthz")
    if answer is None:
        return "no answer"
    status, body = answer
    if not isinstance(body, dict):
        return f"HTTP {status}"
    return body.get("role", "?") if body.get("status") == "ok" else str(body.get("status", f"HTTP {status}"))


def settled_leader(bodies: list[dict[str, Any]]) -> bool:
    """Exactly one coordinator leads and every one joined the leader group's generation its term was granted
    in. Until then a member still joining makes the group rebalance, which revokes leadership everywhere for a
    moment (both coordinators read as standby) and may move it."""
    if not bodies:
        return False
    generations = {(b.get("group_generation"), b.get("term_generation")) for b in bodies}
    joined, granted = next(iter(generations))
    leaders = sum(b.get("role") == "leader" or b.get("is_leader") is True for b in bodies)
    return leaders == 1 and len(generations) == 1 and joined == granted and joined is not None


def agent_health(health_url: str) -> str:
    """The agent's own verdict: 'ok', 'warn', 'fail' (or 'no answer')."""
    answer = get_json(f"{health_url}/healthz")
    if answer is None:
        return "no answer"
    status, body = answer
    return str(body.get("status", f"HTTP {status}")) if isinstance(body, dict) else f"HTTP {status}"
