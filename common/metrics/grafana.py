"""Rewrite a Grafana dashboard (its JSON model) from dcgm-exporter's names to OpenTelemetry's, with
:mod:`myolo.common.metrics.promql`: every query (``expr``, and the template variables' ``query`` / ``definition``)
and the legend templates that name a label (``{{gpu}}``). Everything else is kept as it was.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from myolo.common.metrics.mapping import Mapping, load
from myolo.common.metrics.promql import PromqlError, translate, translate_template

MAX_DASHBOARD_BYTES = 16 * 1024 * 1024
_QUERY_KEYS = ("expr", "query", "definition")


@dataclass(frozen=True)
class DashboardTranslation:
    dashboard: dict[str, Any]
    rewritten: int  # queries changed
    notes: list[str]  # "panels[4].targets[0].expr: ..." for what needs a person


def translate_dashboard(text: str | bytes, mapping: Mapping | None = None) -> DashboardTranslation:
    """Raises ``ValueError`` when ``text`` is not a dashboard's JSON (too big, not JSON, not an object)."""
    if len(text) > MAX_DASHBOARD_BYTES:
        raise ValueError(f"dashboard is {len(text)} bytes; at most {MAX_DASHBOARD_BYTES}")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError("a Grafana dashboard is a JSON object")
    mapping = mapping or load()
    state = _Walk(mapping)
    return DashboardTranslation(state.walk(doc, "", {}), state.rewritten, state.notes)


class _Walk:
    def __init__(self, mapping: Mapping) -> None:
        self.mapping = mapping
        self.rewritten = 0
        self.notes: list[str] = []

    def walk(self, node: Any, path: str, labels: dict[str, str]) -> Any:
        if isinstance(node, list):
            return [self.walk(v, f"{path}[{i}]", labels) for i, v in enumerate(node)]
        if not isinstance(node, dict):
            return node
        # a target's legend names the labels of its own query: rewrite the queries first
        out: dict[str, Any] = {}
        here = dict(labels)
        for key, value in node.items():
            if key in _QUERY_KEYS and isinstance(value, str):
                out[key] = self.query(value, f"{path}.{key}".lstrip("."), here)
            else:
                out[key] = value
        for key, value in node.items():
            if key in _QUERY_KEYS and isinstance(value, str):
                continue
            if key == "legendFormat" and isinstance(value, str):
                out[key] = translate_template(value, here)
            else:
                out[key] = self.walk(value, f"{path}.{key}".lstrip("."), here)
        return out

    def query(self, text: str, where: str, labels: dict[str, str]) -> str:
        try:
            t = translate(text, self.mapping)
        except PromqlError as exc:
            if where.endswith(".expr"):
                self.notes.append(f"{where}: left as it was: {exc}")
            return text
        if t.text != text:
            self.rewritten += 1
        labels.update(t.labels)
        self.notes += [f"{where}: {n}" for n in t.notes]
        return t.text
