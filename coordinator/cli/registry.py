"""``myoloctl registry ...``: the model registry from the command line.

``models``, ``versions``, ``show`` read (any coordinator); ``register``, ``alias set|rm`` and ``model set`` write
(a standby redirects them to the leader). What can be checked here is checked before anything is sent (a
retraining template as the ElasticJob a run submits, a margin, metrics, an artifact's sha256 computed from the
local file), so a mistake exits 2 naming the option or the manifest's field. ``-o json|yaml`` print the API's
answer as it came.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from rich.console import Console
from rich.markup import escape

from myolo.common.digest import sha256_file
from myolo.coordinator.cli import registry_view as view
from myolo.coordinator.cli.client import ApiClient, ApiOption
from myolo.coordinator.cli.exits import fail
from myolo.coordinator.cli.output import Output, OutputOption, new_console, print_body
from myolo.coordinator.core.errors import NotFound
from myolo.coordinator.jobs import units
from myolo.coordinator.jobs.manifest import MAX_MANIFEST_BYTES
from myolo.coordinator.registry import checks
from myolo.coordinator.registry.answers import ModelAnswer
from myolo.coordinator.registry.errors import RegistryError
from myolo.coordinator.registry.interface import NewVersion
from myolo.coordinator.registry.records import RetrainTemplate
from myolo.events.payloads.models import EvalResult, ModelExport

app = typer.Typer(
    help="The model registry: models, their versions (lineage, evaluations) and aliases (champion, challenger) "
    "with the history of who moved them, when and why.",
    no_args_is_help=True,
)
alias_app = typer.Typer(help="Move, remove or look back at a model's aliases.", no_args_is_help=True)
model_app = typer.Typer(
    help="A model's settings: description, retraining template, auto-promotion.", no_args_is_help=True
)
app.add_typer(alias_app, name="alias")
app.add_typer(model_app, name="model")

ModelArg = Annotated[str, typer.Argument(help="Model name, as `myoloctl registry models` lists it.")]
AliasArg = Annotated[str, typer.Argument(help="Alias name: champion, challenger, or any other (e.g. staging).")]
ReasonOption = Annotated[str, typer.Option("--reason", help="Why (required): kept in the alias's history.")]


# ---- reads ----------------------------------------------------------------------------------------------------
@app.command("models")
def models(output: OutputOption = Output.table, api: ApiOption = None) -> None:
    """Every model: its newest version, champion and challenger, other aliases, retraining and promotion."""
    listed = ApiClient.from_option(api).models()
    print_body(listed, output, lambda console: view.print_models(console, listed.items))


@app.command("versions")
def versions(
    model: ModelArg,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="At most this many, newest first.")] = 100,
    before: Annotated[
        int | None,
        typer.Option("--before", min=1, help="Only versions below this number (paging).", show_default=False),
    ] = None,
    output: OutputOption = Output.table,
    api: ApiOption = None,
) -> None:
    """A model's versions, newest first: aliases, source (job/generation), steps, held-out loss, parent."""
    page = ApiClient.from_option(api).versions(model, limit, before)
    print_body(page, output, lambda console: view.print_versions(console, model, page.items, page.next_before))


@app.command("show")
def show(
    model: ModelArg,
    version: Annotated[int, typer.Argument(min=1, help="Version number (1, 2, ...).")],
    output: OutputOption = Output.table,
    api: ApiOption = None,
) -> None:
    """One version in full, with its evaluation and lineage.

    Artifact and checksums, the job and drift event behind it, its evaluation as a model-index table, why it was (not) auto-promoted, and its lineage up to the root.
    """
    answer = ApiClient.from_option(api).version(model, version)
    print_body(answer, output, lambda console: view.print_version(console, answer))


# ---- register -------------------------------------------------------------------------------------------------
def is_url(artifact: str) -> bool:
    """A remote artifact (s3://, https://), which myoloctl does not read."""
    return "://" in artifact and not artifact.startswith("file://")


def local_path(artifact: str) -> Path:
    return Path(artifact.removeprefix("file://")).expanduser()


def _digest(path: Path) -> tuple[str, int]:
    try:
        return sha256_file(path)
    except OSError as exc:
        fail(f"--artifact {path}: cannot read it to compute its sha256: {exc.strerror or exc}", code=2)


def parse_metrics(value: str) -> tuple[dict[str, float], EvalResult | None, ModelExport | None]:
    """``loss=2.3,perplexity=9.9``, or a JSON file: such a map, an evaluation (``dataset``, ``loss``, ...) or the
    trainer's ``<artifact>.json`` export (its evaluation, steps, data checksum and watermark are taken)."""
    path = Path(value).expanduser()
    if value.endswith(".json") or path.is_file():
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            fail(f"--metrics {value}: cannot read it as JSON: {exc}", code=2)
        try:
            if isinstance(data, dict) and "artifact" in data:
                export = msgspec.convert(data, ModelExport)
                return {}, export.eval, export
            if isinstance(data, dict) and "dataset" in data:
                return {}, msgspec.convert(data, EvalResult), None
            return msgspec.convert(data, dict[str, float]), None, None
        except msgspec.ValidationError as exc:
            fail(f"--metrics {value}: {exc} (give name=value pairs, an evaluation or the trainer's export)", code=2)
    metrics: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in value.split(","))):
        name, sep, number = part.partition("=")
        try:
            metrics[name.strip()] = float(number)
        except ValueError:
            fail(f"--metrics: {part!r} is not name=number (e.g. loss=2.3,perplexity=9.9)", code=2)
        if not sep or not name.strip():
            fail(f"--metrics: {part!r} is not name=number (e.g. loss=2.3,perplexity=9.9)", code=2)
    return metrics, None, None


def parse_tags(values: list[str]) -> dict[str, str]:
    tags = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--tag: {item!r} is not key=value", code=2)
        tags[key] = value
    return tags


@app.command("register")
def register(
    model: ModelArg,
    artifact: Annotated[
        str, typer.Option("--artifact", help="The weights (safetensors): a local path, or a URL (s3://, https://).")
    ],
    sha256: Annotated[
        str | None,
        typer.Option(
            "--sha256", help="The artifact's sha256 (default: computed from the local file).", show_default=False
        ),
    ] = None,
    metrics: Annotated[
        str | None,
        typer.Option(
            "--metrics",
            help="loss=2.3,perplexity=9.9, or a JSON file: such a map, an evaluation, or the trainer's <artifact>.json.",
            show_default=False,
        ),
    ] = None,
    parent: Annotated[
        int | None, typer.Option("--parent", min=1, help="The version it was trained from.", show_default=False)
    ] = None,
    description: Annotated[str, typer.Option("--description", help="What this version is.")] = "",
    tag: Annotated[list[str] | None, typer.Option("--tag", help="key=value (repeatable).", show_default=False)] = None,
    api: ApiOption = None,
) -> None:
    """Register a version made outside the cluster's jobs (it becomes challenger).

    It becomes champion too when the model's promote margin says so. The same artifact with the same sha256 again answers the version already registered.
    """
    values, evaluation, export = parse_metrics(metrics) if metrics else ({}, None, None)
    size = None
    if not is_url(artifact):
        local = local_path(artifact)
        if sha256 is None or local.is_file():
            digest, size = _digest(local)
            if sha256 is not None and sha256.lower() != digest:
                fail(f"--sha256: {local} has sha256 {digest}, not {sha256}; nothing was sent", code=2)
            sha256 = digest
        artifact = str(local.resolve())
    elif sha256 is None:
        fail(f"--sha256: required for a URL (myoloctl does not download {artifact})", code=2)
    body: dict[str, Any] = {
        "artifact": artifact,
        "sha256": sha256.lower(),
        "metrics": values,
        "description": description,
    }
    for key, value in (
        ("size_bytes", size if size is not None else export.size_bytes if export else None),
        ("steps", export.steps if export else None),
        ("data_sha256", export.data_sha256 if export else None),
        ("eval", msgspec.to_builtins(evaluation) if evaluation else None),
        ("parent", parent),
        ("tags", parse_tags(tag or []) or None),
        ("watermark", msgspec.to_builtins(export.watermark) if export and export.watermark else None),
    ):
        if value is not None:
            body[key] = value
    client = ApiClient.from_option(api)
    try:
        new = msgspec.convert(body, NewVersion)
    except msgspec.ValidationError as exc:
        fail(f"{exc}; nothing was sent")
    v = client.register(model, new)
    verb = "registered" if client.last_status == 201 else "was registered already"
    aliases = f" ({', '.join(v.aliases)})" if v.aliases else ""
    new_console().print(escape(f"model/{v.model} version {v.version}{aliases} {verb} via {client.last_url}"))
    if v.auto_promotion:
        new_console().print(escape(v.auto_promotion))


# ---- aliases --------------------------------------------------------------------------------------------------
@alias_app.command("set")
def alias_set(
    model: ModelArg,
    alias: AliasArg,
    version: Annotated[int, typer.Argument(min=1, help="The version it points at from now on.")],
    reason: ReasonOption,
    api: ApiOption = None,
) -> None:
    """Point ALIAS at VERSION (promote, roll back), saying why; the move is kept in the alias's history."""
    client = ApiClient.from_option(api)
    moved = client.set_alias(model, alias, version, reason)
    last = moved.history[-1] if moved.history else None
    was = f" (was v{last.previous})" if last is not None and last.previous is not None else ""
    new_console().print(escape(f"model/{model}@{alias} -> v{version}{was} via {client.last_url}"))


@alias_app.command("rm")
def alias_rm(model: ModelArg, alias: AliasArg, reason: ReasonOption, api: ApiOption = None) -> None:
    """Remove ALIAS, saying why (its history stays: `alias history` shows it)."""
    client = ApiClient.from_option(api)
    client.remove_alias(model, alias, reason)
    new_console().print(escape(f"model/{model}@{alias} removed via {client.last_url}"))


@alias_app.command("list")
def alias_list(model: ModelArg, output: OutputOption = Output.table, api: ApiOption = None) -> None:
    """A model's aliases (removed ones too) with their last move: by whom, when, why."""
    listed = ApiClient.from_option(api).aliases(model)
    print_body(listed, output, lambda console: view.print_aliases(console, model, listed.items))


def parse_time(value: str) -> float:
    """Seconds since the epoch, or an ISO-8601 time (local time when it names no zone)."""
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        fail(f"--at: {value!r} is not a time: give 2025-03-01T12:00 or seconds since the epoch", code=2)


@alias_app.command("history")
def alias_history(
    model: ModelArg,
    alias: AliasArg,
    at: Annotated[
        str | None,
        typer.Option(
            "--at", help="Also say where it pointed at this time (ISO-8601 or epoch seconds).", show_default=False
        ),
    ] = None,
    output: OutputOption = Output.table,
    api: ApiOption = None,
) -> None:
    """Every move of ALIAS, newest first: version, previous, who, when, why (what was champion when)."""
    history = ApiClient.from_option(api).alias_history(model, alias, parse_time(at) if at is not None else None)
    print_body(history, output, lambda console: view.print_history(console, history))


# ---- model settings -------------------------------------------------------------------------------------------
@model_app.command("show")
def model_show(model: ModelArg, output: OutputOption = Output.table, api: ApiOption = None) -> None:
    """A model's settings: description, retraining template (its manifest), promote margin, aliases."""
    answer = ApiClient.from_option(api).model(model)
    print_body(answer, output, lambda console: _print_model(console, answer))


def _print_model(console: Console, m: ModelAnswer) -> None:
    view.print_models(console, [m])
    if m.description:
        console.print(escape(f"\nDescription: {m.description}"))
    if m.retrain is None:
        console.print("\nRetraining: none (drift is reported, nothing is retrained)")
        return
    t = m.retrain
    start = "the champion's weights" if t.from_champion else "scratch"
    console.print(
        escape(f"\nRetraining: from {start}, exports to {t.artifact_dir}/<job>/, cooldown {t.cooldown_s:g} s")
    )
    console.out(t.manifest.rstrip(), highlight=False)


def _current(api: str | None, model: str) -> ModelAnswer | None:
    try:
        return ApiClient.from_option(api).model(model)
    except NotFound as exc:
        if exc.field == "model":
            return None
        raise


def _template(
    current: RetrainTemplate | None,
    retrain: str | None,
    artifact_dir: str | None,
    from_champion: bool | None,
    cooldown: str | None,
) -> RetrainTemplate | None:
    """The template to send: the file given (or the current one) with the options given over it."""
    if retrain is None and current is None:
        given = [n for n, v in (("--artifact-dir", artifact_dir), ("--cooldown", cooldown)) if v is not None]
        if from_champion is not None:
            given.append("--from-champion/--from-scratch")
        if given:
            fail(f"{given[0]}: the model has no retraining template; give one with --retrain job.yaml", code=2)
        return None
    manifest = current.manifest if current is not None else ""
    if retrain is not None:
        try:
            raw = Path(retrain).expanduser().read_bytes()
        except OSError as exc:
            fail(f"--retrain {retrain}: cannot read it: {exc.strerror or exc}", code=2)
        if len(raw) > MAX_MANIFEST_BYTES:
            fail(f"--retrain {retrain}: over {MAX_MANIFEST_BYTES} bytes (the limit); nothing was sent", code=2)
        manifest = raw.decode("utf-8", errors="replace")
    where = artifact_dir or (current.artifact_dir if current is not None else None)
    if where is None:
        fail("--artifact-dir: required with a new --retrain template (each run exports under it)", code=2)
    try:
        seconds = units.duration_s(cooldown) if cooldown is not None else (current.cooldown_s if current else 3600.0)
    except ValueError as exc:
        fail(f"--cooldown: {exc}", code=2)
    keep = current.from_champion if current is not None else True
    template = RetrainTemplate(
        manifest=manifest,
        artifact_dir=where,
        from_champion=keep if from_champion is None else from_champion,
        cooldown_s=seconds,
    )
    try:
        return checks.template(template)
    except RegistryError as exc:
        fail(f"{exc} (in {retrain or 'the current template'}; nothing was sent)", code=2)


@model_app.command("set")
def model_set(
    model: ModelArg,
    description: Annotated[
        str | None, typer.Option("--description", help="What the model is for.", show_default=False)
    ] = None,
    retrain: Annotated[
        str | None,
        typer.Option(
            "--retrain",
            help="An ElasticJob manifest (YAML) drift retraining submits: no metadata.name, exportPath or initFrom.",
            show_default=False,
        ),
    ] = None,
    artifact_dir: Annotated[
        str | None,
        typer.Option(
            "--artifact-dir", help="Each retraining exports to DIR/<job name>/model.safetensors.", show_default=False
        ),
    ] = None,
    from_champion: Annotated[
        bool | None,
        typer.Option(
            "--from-champion/--from-scratch",
            help="Retrain from the champion's weights, or from scratch.",
            show_default=False,
        ),
    ] = None,
    cooldown: Annotated[
        str | None,
        typer.Option(
            "--cooldown", help="At least this long between two retrainings (1h, 30m, 3600).", show_default=False
        ),
    ] = None,
    no_retrain: Annotated[bool, typer.Option("--no-retrain", help="Remove the retraining template.")] = False,
    promote_margin: Annotated[
        float | None,
        typer.Option(
            "--promote-margin",
            help="Promote a new version on its own when its held-out loss is this fraction below the champion's "
            "(same eval dataset), e.g. 0.02.",
            show_default=False,
        ),
    ] = None,
    manual: Annotated[bool, typer.Option("--manual-promotion", help="Only operators promote (no margin).")] = False,
    quantize_margin: Annotated[
        float | None,
        typer.Option(
            "--quantize-margin",
            help="Promote a quantized version of the champion on its own when its held-out perplexity is at most "
            "this fraction above its source's (measured side by side), e.g. 0.03. --manual-promotion clears it.",
            show_default=False,
        ),
    ] = None,
    api: ApiOption = None,
) -> None:
    """Create a model or change its settings; what is not given stays as it is.

    The template is checked here as the ElasticJob a retraining run submits (an error names the manifest's field and exits 2).
    Setting, changing or removing the template or a margin needs an admin token.
    """
    if no_retrain and retrain is not None:
        fail("--no-retrain: give it or --retrain, not both", code=2)
    if manual and (promote_margin is not None or quantize_margin is not None):
        fail("--manual-promotion: give it or a margin, not both", code=2)
    for flag, value in (("--promote-margin", promote_margin), ("--quantize-margin", quantize_margin)):
        try:
            checks.margin(value, flag.removeprefix("--").replace("-", "_"))
        except RegistryError as exc:
            fail(f"{flag}: {exc.reason}", code=2)
    current = _current(api, model)
    template = (
        None
        if no_retrain
        else _template(current.retrain if current else None, retrain, artifact_dir, from_champion, cooldown)
    )
    margin = (
        None
        if manual
        else promote_margin
        if promote_margin is not None
        else (current.promote_margin if current else None)
    )
    text = description if description is not None else (current.description if current else "")
    body: dict[str, Any] = {"description": text, "retrain": msgspec.to_builtins(template) if template else None}
    body["promote_margin"] = margin
    body["quantize_margin"] = (
        None
        if manual
        else quantize_margin
        if quantize_margin is not None
        else (current.quantize_margin if current else None)
    )
    client = ApiClient.from_option(api)
    m = client.put_model(model, body)
    verb = "created" if client.last_status == 201 else "configured"
    new_console().print(
        escape(
            f"model/{m.name} {verb} via {client.last_url}: retraining {'on' if m.retrain else 'off'}, "
            f"promotion {view.promotion(m)}"
        )
    )
