"""``myoloctl train``: a one-line training command, as an ElasticJob built from flags.

``myoloctl train NAME --defense gradient_compression --param 0.01 ...`` writes the manifest ``myoloctl apply``
would take, checks it the same way (an error names the manifest's field and the flag behind it), and applies
it; ``--dry-run`` prints it instead, so it can be kept, edited and applied later. Its trainer options are
generated from the trainer job's sections, as ``myolo-train``'s are.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
import yaml
from rich.markup import escape

from myolo.common.struct_cli import with_options
from myolo.coordinator.cli.client import ApiOption
from myolo.coordinator.cli.exits import fail
from myolo.coordinator.cli.jobs import submit
from myolo.coordinator.jobs.manifest import API_VERSIONS, ManifestError, camel, manifest_field, parse_manifest
from myolo.events.payloads.trainer_fields import trainer_fields
from myolo.events.payloads.trainer_job import TrainerJobError
from myolo.events.payloads.trainer_values import nest

# the trainer fields with no flag here, and what sets them instead
NO_FLAG = {"parallelism.dp": "the replica count: --min-replicas .. --max-replicas"}
FIELDS = tuple(f for f in trainer_fields() if f.path not in NO_FLAG)
# the manifest field each flag writes, so an error can name the flag too
FLAGS = {"metadata.name": "NAME", "spec.minReplicas": "--min-replicas", "spec.maxReplicas": "--max-replicas"} | {
    manifest_field(f.path): f.flag for f in FIELDS
}


def manifest(name: str, given: dict[str, Any], *, min_replicas: int, max_replicas: int) -> dict[str, Any]:
    """The ElasticJob document the flags (by trainer field path) describe: camelCase, sectioned; a field left
    out takes the trainer's default. The layout goes to spec.replica, determinism to spec.runtime."""
    spec: dict[str, Any] = {"minReplicas": min_replicas, "maxReplicas": max_replicas}
    replica = {k: given.pop(f"parallelism.{k}") for k in ("tp", "pp") if f"parallelism.{k}" in given}
    if replica:
        spec["replica"] = replica
    if "runtime.deterministic" in given:
        spec["runtime"] = {"deterministic": given.pop("runtime.deterministic")}
    sections = nest(given)
    spec["trainer"] = {section: {camel(k): v for k, v in values.items()} for section, values in sections.items()}
    return {"apiVersion": API_VERSIONS[0], "kind": "ElasticJob", "metadata": {"name": name}, "spec": spec}


@with_options(FIELDS, into="given", panel=lambda f: f"Trainer: {f.section}")
def train(
    name: Annotated[str, typer.Argument(help="The job's name (metadata.name).")],
    min_replicas: Annotated[int, typer.Option(help="Fewest data-parallel replicas to run with.")] = 1,
    max_replicas: Annotated[int, typer.Option(help="Most data-parallel replicas.")] = 1,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the manifest; send nothing.")] = False,
    api: ApiOption = None,
    given: dict[str, Any] | None = None,
) -> None:
    """Train a model as an elastic job built from flags (`myoloctl train --defense=... --param=...`).

    The manifest is checked here first (an error names its field and the flag, exit 2); --dry-run prints it (YAML) for `myoloctl apply -f`.
    """
    try:
        doc = manifest(name, dict(given or {}), min_replicas=min_replicas, max_replicas=max_replicas)
    except TrainerJobError as exc:
        fail(escape(f"{exc}; nothing was sent"))
    text = yaml.safe_dump(doc, sort_keys=False)
    try:
        parse_manifest(text)
    except ManifestError as exc:
        flag = FLAGS.get(exc.field)
        fail(escape(f"{exc}" + (f" (set by {flag})" if flag else "") + "; nothing was sent"))
    if dry_run:
        typer.echo(text, nl=False)
        return
    submit(text, api)
