"""The dashboard's files (HTML, JS, CSS), read once from ``static/`` and served by the coordinator itself: the
browser fetches nothing from anywhere else. Every answer of ``/ui`` carries the same security headers: a
strict Content-Security-Policy (only this origin's scripts and styles, none inline), nosniff, no framing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

STATIC = Path(__file__).with_name("static")
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
}
NAME = re.compile(r"^[a-z0-9-]+\.(html|js|css|png)$")
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str


def load(folder: Path = STATIC) -> dict[str, Asset]:
    """Every servable file of ``folder`` by name (nothing else: no subfolders, no other names)."""
    out: dict[str, Asset] = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and NAME.match(path.name):
            out[path.name] = Asset(path.read_bytes(), TYPES[path.suffix])
    return out


def weight(assets: dict[str, Asset]) -> dict[str, int]:
    """Bytes per file a page loads (every one but the login page's), and their sum under ``total``."""
    sizes = {n: len(a.body) for n, a in assets.items() if n != "login.html"}
    return {**sizes, "total": sum(sizes.values())}
