"""Rewrite a PromQL expression from the names ``/metrics`` serves (dcgm-exporter's and ours) to the names
OpenTelemetry's metrics get once Prometheus stores them, with the mapping file: the metric, its label matchers
and grouping labels, the fixed attributes that tell the series apart, and the unit (a ``(... / 1000000)`` where
the units differ), so a dashboard keeps showing the same numbers.

It works on tokens, not a full parse: everything it does not know (functions, operators, Grafana's
``$variables``) passes through as written. What it cannot rewrite safely it says in ``notes``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from myolo.common.metrics import units
from myolo.common.metrics.mapping import Mapping, MetricSpec, load
from myolo.common.metrics.text import format_value

MAX_EXPR = 64 * 1024
_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
    |(?P<comment>\#[^\n]*)
    |(?P<str>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`[^`]*`)
    |(?P<var>\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\[\[[A-Za-z0-9_:.]*\]\])
    |(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
    |(?P<num>[0-9][0-9A-Za-z_.]*|\.[0-9][0-9A-Za-z_.]*)
    |(?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=(){}\[\],@:])
    """,
    re.VERBOSE,
)
_GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
# functions of a range vector whose result scales with their input: the unit's factor can go outside them
_LINEAR_RANGE = {
    "rate",
    "irate",
    "increase",
    "delta",
    "idelta",
    "deriv",
    "avg_over_time",
    "min_over_time",
    "max_over_time",
    "sum_over_time",
    "last_over_time",
}
# functions of a range vector that a unit's factor does not change
_SCALE_FREE = {"changes", "resets", "count_over_time", "absent_over_time", "present_over_time"}


class PromqlError(ValueError):
    """The text cannot be read as PromQL; says where."""


@dataclass
class Token:
    kind: str
    text: str
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)

    def out(self) -> str:
        return "".join(self.before) + self.text + "".join(self.after)


@dataclass(frozen=True)
class Translation:
    text: str
    metrics: list[str]  # the mapped names it found, in order
    notes: list[str]  # what it could not rewrite, and why
    labels: dict[str, str] = field(default_factory=dict)  # label -> attribute, of the metrics it found


def tokenize(expr: str) -> list[Token]:
    if len(expr) > MAX_EXPR:
        raise PromqlError(f"expression is {len(expr)} characters; at most {MAX_EXPR}")
    out, pos = [], 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None:
            raise PromqlError(f"cannot read {expr[pos : pos + 20]!r} at character {pos}")
        out.append(Token(m.lastgroup or "", m.group()))
        pos = m.end()
    return out


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _unquote(text: str) -> str:
    body = text[1:-1]
    return body if text[0] == "`" else re.sub(r"\\(.)", r"\1", body)


def factor_text(k: float) -> str:
    """`` * 100`` or `` / 1048576``: what turns the stored value into the scraped one."""
    if k >= 1:
        return f" * {format_value(k)}"
    inv = 1.0 / k
    return f" / {format_value(round(inv))}" if abs(inv - round(inv)) < 1e-9 * inv else f" * {format_value(k)}"


class _Rewriter:
    def __init__(self, expr: str, mapping: Mapping) -> None:
        self.toks = tokenize(expr)
        self.sig = [i for i, t in enumerate(self.toks) if t.kind not in ("ws", "comment")]
        self.mapping = mapping
        self.specs = mapping.by_name()
        self.found: list[str] = []
        self.notes: list[str] = []
        self.labels_in_play: dict[str, str] = {}  # label -> attribute, of the metrics selected

    # -- helpers over significant tokens ------------------------------------------------------------------
    def t(self, s: int) -> Token | None:
        return self.toks[self.sig[s]] if 0 <= s < len(self.sig) else None

    def is_op(self, s: int, *texts: str) -> bool:
        tok = self.t(s)
        return tok is not None and tok.kind == "op" and tok.text in texts

    def close_of(self, s: int, open_: str, close: str) -> int:
        depth = 0
        for j in range(s, len(self.sig)):
            if self.is_op(j, open_):
                depth += 1
            elif self.is_op(j, close):
                depth -= 1
                if depth == 0:
                    return j
        raise PromqlError(f"{open_!r} is never closed")

    def balanced(self) -> None:
        pairs, stack = {")": "(", "]": "[", "}": "{"}, []
        for t in self.toks:
            if t.kind != "op":
                continue
            if t.text in "([{":
                stack.append(t.text)
            elif t.text in pairs and (not stack or stack.pop() != pairs[t.text]):
                raise PromqlError(f"{t.text!r} closes nothing that is open")
        if stack:
            raise PromqlError(f"{stack[-1]!r} is never closed")

    # -- the rewrite ---------------------------------------------------------------------------------------
    def run(self) -> Translation:
        self.balanced()
        s = 0
        while s < len(self.sig):
            tok = self.t(s)
            assert tok is not None
            if self.is_op(s, "{"):
                s = self.close_of(s, "{", "}") + 1  # a bare {...} selector: its labels are not ours to know
            elif tok.kind == "ident" and tok.text in self.specs and not self.is_op(s + 1, "("):
                s = self.selector(s, self.specs[tok.text])
            else:
                s += 1
        self.grouping()
        return Translation("".join(t.out() for t in self.toks), self.found, self.notes, dict(self.labels_in_play))

    def selector(self, s: int, spec: MetricSpec) -> int:
        """Rewrite the selector whose name is at ``s``; returns the position after it."""
        self.found.append(spec.name)
        for label in self.mapping.labels_of(spec):
            self.labels_in_play.setdefault(label, self.mapping.attribute(spec, label) or label)
        name = self.t(s)
        assert name is not None
        name.text = spec.otel_prometheus_name
        fixed = dict(spec.otel.attributes)
        end = s
        if self.is_op(s + 1, "{"):
            end = self.close_of(s + 1, "{", "}")
            self.matchers(s + 2, end, fixed, spec)
        extra = ", ".join(f"{units.prometheus_label(a)}={_quote(v)}" for a, v in sorted(fixed.items()))
        if extra:
            if end == s:
                name.after.append("{" + extra + "}")
            else:
                close = self.t(end)
                assert close is not None
                has_matchers = end > s + 2 and not self.is_op(end - 1, ",")
                close.before.append((", " if has_matchers else "") + extra)
        ranged = self.is_op(end + 1, "[")
        if ranged:
            end = self.close_of(end + 1, "[", "]")
        end = self.modifiers(end)
        k = 1.0 / spec.otel_scale
        if abs(k - 1.0) > 1e-12:
            self.scale(s, end, k, ranged, spec)
        return end + 1

    def matchers(self, start: int, stop: int, fixed: dict[str, str], spec: MetricSpec) -> None:
        """Rename the labels of ``{...}`` between ``start`` and ``stop``; drop from ``fixed`` what they name."""
        s = start
        while s < stop:
            label, op, value = self.t(s), self.t(s + 1), self.t(s + 2)
            if label is None or op is None or value is None or label.kind not in ("ident", "str"):
                raise PromqlError('a label matcher is not `label op "value"`')
            raw = label.text if label.kind == "ident" else _unquote(label.text)
            attr = self.mapping.attribute(spec, raw)
            for named in [a for a in fixed if units.prometheus_label(a) == raw]:
                fixed.pop(named)  # the query already names this attribute by its stored label
            if attr is not None:
                label.text = units.prometheus_label(attr)
                fixed.pop(attr, None)
                if op.text in ("=", "!=") and value.kind == "str":
                    new = self.mapping.attribute_value(attr, _unquote(value.text))
                    if new != _unquote(value.text):
                        value.text = _quote(new)
                elif op.text in ("=~", "!~") and attr in self.mapping.values:
                    self.notes.append(
                        f"{raw}{op.text}{value.text}: a regular expression on a label whose values differ in "
                        f"OpenTelemetry ({self.mapping.values[attr]}); rewrite its values by hand"
                    )
            s += 3
            if self.is_op(s, ","):
                s += 1

    def modifiers(self, end: int) -> int:
        """Extend a selector over ``offset 5m`` and ``@ 1700000000`` / ``@ start()``."""
        while True:
            nxt = self.t(end + 1)
            if nxt is not None and nxt.kind == "ident" and nxt.text == "offset":
                end += 2 + (1 if self.is_op(end + 2, "-") else 0)
            elif self.is_op(end + 1, "@"):
                end += 2
                if self.is_op(end + 1, "("):
                    end = self.close_of(end + 1, "(", ")")
            else:
                return end

    def scale(self, s: int, end: int, k: float, ranged: bool, spec: MetricSpec) -> None:
        first, last = self.t(s), self.t(end)
        assert first is not None and last is not None
        factor = factor_text(k)
        if not ranged:
            first.before.append("(")
            last.after.append(factor + ")")
            return
        func = self.t(s - 2)
        if (
            self.is_op(s - 1, "(")
            and func is not None
            and func.kind == "ident"
            and func.text in _LINEAR_RANGE
            and self.is_op(end + 1, ")")
        ):
            func.before.append("(")
            close = self.t(end + 1)
            assert close is not None
            close.after.append(factor + ")")
            return
        if func is not None and func.text in _SCALE_FREE and self.is_op(s - 1, "("):
            return
        self.notes.append(
            f"{spec.name}: the units differ ({spec.unit} scraped, {spec.otel.unit} stored) and its range vector is "
            f"not the whole argument of {'/'.join(sorted(_LINEAR_RANGE))}; multiply the result by "
            f"{format_value(k)} by hand"
        )

    def grouping(self) -> None:
        """Rename, in ``by (...)``, ``on (...)`` and the like and in Grafana's ``label_values(..., label)``, the
        labels of the metrics this expression selects."""
        for s in range(len(self.sig)):
            tok = self.t(s)
            if tok is None or tok.kind != "ident" or not self.is_op(s + 1, "("):
                continue
            if tok.text in _GROUPING:
                close = self.close_of(s + 1, "(", ")")
                for j in range(s + 2, close):
                    self._rename_label(j)
            elif tok.text == "label_values":
                close = self.close_of(s + 1, "(", ")")
                if self.is_op(close - 2, ",") or close == s + 3:
                    self._rename_label(close - 1)
            elif tok.text in ("label_replace", "label_join"):
                close = self.close_of(s + 1, "(", ")")
                for j in range(s + 2, close):
                    arg = self.t(j)
                    if arg is not None and arg.kind == "str" and _unquote(arg.text) in self.labels_in_play:
                        self.notes.append(f"{tok.text}: label {arg.text} is left as written; rename it by hand")

    def _rename_label(self, s: int) -> None:
        tok = self.t(s)
        if tok is not None and tok.kind == "ident" and tok.text in self.labels_in_play:
            tok.text = units.prometheus_label(self.labels_in_play[tok.text])


def translate(expr: str, mapping: Mapping | None = None) -> Translation:
    """Raises :class:`PromqlError` when ``expr`` cannot be read (an unknown character, an unclosed bracket)."""
    return _Rewriter(expr, mapping or load()).run()


def translate_template(text: str, labels: dict[str, str]) -> str:
    """Grafana's legend templates: ``GPU {{gpu}}`` -> ``GPU {{myolo_gpu_index}}`` for the labels given (label ->
    attribute, as :attr:`Translation.labels` has them)."""

    def sub(m: re.Match[str]) -> str:
        label = m.group(1)
        attr = labels.get(label)
        return "{{" + (units.prometheus_label(attr) if attr else label) + "}}"

    return re.sub(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}", sub, text)
