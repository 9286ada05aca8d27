"""How ``myoloctl registry`` shows the registry to a person: tables of models, versions and alias moves, and
one version in full (its evaluation as a model-index table, its lineage to the root).

Everything here reads the API's answers as the registry's own Structs (``myolo.coordinator.registry.answers``).
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.text import Text

from myolo.coordinator.cli.render import Cell, num, reasons, table
from myolo.coordinator.registry.answers import AliasAnswer, AliasHistory, ModelAnswer, VersionAnswer
from myolo.coordinator.registry.records import CHALLENGER, CHAMPION, AliasChange

MODEL_COLUMNS = ("MODEL", "LATEST", "CHAMPION", "CHALLENGER", "OTHER ALIASES", "RETRAIN", "PROMOTION", "UPDATED")
VERSION_COLUMNS = ("VERSION", "ALIASES", "SOURCE", "JOB/GEN", "STEPS", "LOSS", "PPL", "PARENT", "CREATED", "BY")
CHANGE_COLUMNS = ("WHEN", "VERSION", "PREVIOUS", "BY", "REASON")


def clock(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _v(n: int | None) -> str:
    return "-" if n is None else f"v{n}"


def promotion(m: ModelAnswer) -> str:
    said = "manual" if m.promote_margin is None else f"auto >= {m.promote_margin:.1%}"
    return said + ("" if m.quantize_margin is None else f", quantized within {m.quantize_margin:.1%}")


def print_models(console: Console, models: list[ModelAnswer]) -> None:
    if not models:
        console.print("No models yet (`myoloctl registry register MODEL --artifact ...` registers one).")
        return
    rows: list[list[Cell]] = []
    for m in models:
        others = ", ".join(f"{a}={_v(v)}" for a, v in sorted(m.aliases.items()) if a not in (CHAMPION, CHALLENGER))
        rows.append(
            [
                m.name,
                _v(m.latest_version or None),
                Text(_v(m.aliases.get(CHAMPION)), style="green" if CHAMPION in m.aliases else ""),
                _v(m.aliases.get(CHALLENGER)),
                others or "-",
                "yes" if m.retrain is not None else "no",
                promotion(m),
                clock(m.updated),
            ]
        )
    table(console, MODEL_COLUMNS, rows)


def _run(v: VersionAnswer) -> str:
    return f"{v.job}/{v.generation}" if v.job is not None else "-"


def print_versions(console: Console, model: str, versions: list[VersionAnswer], next_before: int | None) -> None:
    if not versions:
        console.print(f"Model {model} has no versions yet.")
        return
    rows: list[list[Cell]] = [
        [
            _v(v.version),
            Text(",".join(v.aliases) or "-", style="green" if CHAMPION in v.aliases else ""),
            v.source,
            _run(v),
            "-" if v.steps is None else str(v.steps),
            num(v.metrics.get("loss"), digits=4),
            num(v.metrics.get("perplexity"), digits=2),
            _v(v.parent),
            clock(v.created),
            v.by,
        ]
        for v in versions
    ]
    table(console, VERSION_COLUMNS, rows)
    if next_before is not None:
        console.print(f"(older versions: --before {next_before})")


def _field(console: Console, key: str, value: str) -> None:
    line = Text(f"{key + ':':<16}")
    line.append(value)
    console.print(line)


def print_quantization(console: Console, v: VersionAnswer) -> None:
    """How the version was quantized from its parent, and the two evaluations side by side."""
    q = v.quantization
    assert q is not None
    group = "whole rows" if q.group_size == 0 else f"groups of {q.group_size}"
    _field(
        console,
        "Quantized",
        f"{q.scheme}, {q.bits} bits, {group}: {q.layers} layers, {q.bits_per_weight:.2f} bits/weight",
    )
    _field(console, "  from", f"{_v(v.parent)} (sha256 {(q.source_sha256 or '-')[:12]})")
    _field(console, "  calibration", f"{q.calib_tokens:,} tokens, sha256 {(q.calib_sha256 or '-')[:12]}")
    mine = next((r for e in v.model_index for r in e.results), None)
    ppl = next((m.value for m in mine.metrics if m.type == "perplexity"), None) if mine else None
    if q.source_eval is not None and ppl is not None:
        src = q.source_eval
        _field(
            console,
            "  held-out",
            f"perplexity {ppl:.4f} against the parent's {src.perplexity:.4f} ({ppl / src.perplexity - 1:+.2%}) on "
            f"{src.tokens:,} tokens of {src.dataset} (sha256 {(src.dataset_sha256 or '-')[:12]})",
        )


def print_version(console: Console, v: VersionAnswer) -> None:
    _field(console, "Model", v.model)
    _field(console, "Version", f"{v.version}" + (f"  ({', '.join(v.aliases)})" if v.aliases else ""))
    _field(console, "Source", f"job {v.job}, generation {v.generation}" if v.job is not None else v.source)
    _field(console, "Artifact", v.artifact)
    _field(console, "sha256", v.sha256)
    if v.size_bytes is not None:
        _field(console, "Size", f"{v.size_bytes:,} bytes")
    if v.steps is not None:
        _field(console, "Steps", str(v.steps))
    _field(console, "Training data", v.data_sha256 or "- (no sha256: synthetic data, or not given)")
    _field(console, "Created", f"{clock(v.created)} by {v.by}")
    _field(console, "Parent", _v(v.parent))
    if v.drift_event:
        _field(console, "Drift event", v.drift_event)
    if v.description:
        _field(console, "Description", v.description)
    if v.tags:
        _field(console, "Tags", ", ".join(f"{k}={t}" for k, t in sorted(v.tags.items())))
    if v.auto_promotion:
        _field(console, "Auto-promotion", v.auto_promotion)
    if v.quantization is not None:
        print_quantization(console, v)
    if v.watermark is not None:
        w = v.watermark
        _field(console, "Watermark", f"{w.bits} bits, key commitment {w.commitment[:16]}... (verify-watermark)")
    console.print()
    console.print(Text("Evaluation (model-index):", style="bold"))
    rows: list[list[Cell]] = []
    for entry in v.model_index:
        for r in entry.results:
            for metric in r.metrics:
                revision = (r.dataset.revision or "-")[:12]
                rows.append(
                    [r.task.type, r.dataset.type, r.dataset.split or "-", revision, metric.type, f"{metric.value:.4f}"]
                )
    if rows:
        table(console, ("TASK", "DATASET", "SPLIT", "REVISION", "METRIC", "VALUE"), rows, indent=2)
    else:
        console.print("  none (no held-out evaluation)")
    others = {k: m for k, m in v.metrics.items() if k not in ("loss", "perplexity") or not v.model_index}
    if others:
        label = "other metrics" if v.model_index else "metrics given (no dataset named)"
        console.print(f"  {label}: " + ", ".join(f"{k}={m:g}" for k, m in sorted(others.items())))
    console.print()
    console.print(Text("Lineage (this version first, to the root):", style="bold"))
    lineage = v.lineage or []
    table(
        console,
        ("VERSION", "PARENT", "SOURCE", "JOB/GEN", "DRIFT EVENT", "CREATED", "BY"),
        [
            [
                _v(e.version),
                _v(e.parent),
                e.source,
                f"{e.job}/{e.generation}" if e.job is not None else "-",
                e.drift_event or "-",
                clock(e.created),
                e.by,
            ]
            for e in lineage
        ],
        indent=2,
    )


def _changes(changes: list[AliasChange]) -> list[list[Cell]]:
    """Each move with its whole reason: in a history, the reason is what one reads it for."""
    return [
        [clock(c.when), _v(c.version) if c.version is not None else "removed", _v(c.previous), c.by, c.reason]
        for c in changes
    ]


def print_aliases(console: Console, model: str, aliases: list[AliasAnswer]) -> None:
    if not aliases:
        console.print(f"Model {model} has no aliases yet.")
        return
    rows: list[list[Cell]] = []
    for a in aliases:
        last = a.last
        now = _v(a.version) if a.version is not None else "removed"
        rows.append(
            [a.alias, now, clock(a.updated), last.by if last else "-", reasons([last.reason], 80) if last else "-"]
        )
    table(console, ("ALIAS", "VERSION", "SINCE", "BY", "REASON"), rows)


def print_history(console: Console, h: AliasHistory) -> None:
    now = _v(h.version) if h.version is not None else "removed"
    console.print(f"{h.model}@{h.alias} -> {now}")
    if h.at is not None:
        console.print(f"at {clock(h.at)} it pointed at {_v(h.version_at) if h.version_at is not None else 'nothing'}")
    table(console, CHANGE_COLUMNS, _changes(h.history or []))
    if h.dropped:
        console.print(f"({h.dropped} older moves are no longer kept: the newest 500 are)")
