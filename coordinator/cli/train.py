"""``myoloctl train``: a one-line training command, as an ElasticJob built from flags.

``myoloctl train NAME --defense gradient_compression --param 0.01 ...`` writes the manifest ``myoloctl apply``
would take, checks it the same way (an error names the manifest's field and the flag behind it), and applies
it; ``--dry-run`` prints it instead, so it can be kept, edited and applied later.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
import yaml
from rich.markup import escape

from myolo.coordinator.cli import common
from myolo.coordinator.cli.client import ApiOption
from myolo.coordinator.cli.jobs import submit
from myolo.coordinator.jobs.manifest import API_VERSIONS, ManifestError, parse_manifest

# the manifest field each flag writes, so an error can name the flag too
FLAGS = {
    "metadata.name": "NAME",
    "spec.minReplicas": "--min-replicas",
    "spec.maxReplicas": "--max-replicas",
    "spec.replica.tp": "--tp",
    "spec.replica.pp": "--pp",
    "spec.checkpointDir": "--checkpoint-dir",
    "spec.trainer.model": "--model",
    "spec.trainer.modelArgs": "--model-arg",
    "spec.trainer.steps": "--steps",
    "spec.trainer.globalBatch": "--global-batch",
    "spec.trainer.seqLen": "--seq-len",
    "spec.trainer.lr": "--lr",
    "spec.trainer.dataPath": "--data",
    "spec.trainer.checkpointEvery": "--checkpoint-every",
    "spec.trainer.exportPath": "--export-path",
    "spec.trainer.evalDataPath": "--eval-data",
    "spec.trainer.device": "--device",
    "spec.trainer.defense": "--defense",
    "spec.trainer.defenseParam": "--param",
    "spec.trainer.defenseMomentum": "--defense-momentum",
    "spec.trainer.defenseExchange": "--defense-exchange",
    "spec.trainer.defenseWarmupSteps": "--defense-warmup-steps",
    "spec.trainer.defenseVocabParam": "--defense-vocab-param",
    "spec.trainer.ncclAlgo": "--nccl-algo",
    "spec.trainer.watermark": "--watermark",
}


def _model_args(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            common.fail(escape(f"--model-arg {item!r} must look like name=value, e.g. n_layers=8"))
        out[key] = yaml.safe_load(raw)
    return out


def manifest(
    name: str,
    trainer: dict[str, Any],
    *,
    min_replicas: int,
    max_replicas: int,
    tp: int,
    pp: int,
    checkpoint_dir: str | None,
) -> dict[str, Any]:
    """The ElasticJob document the flags describe (camelCase; a field left out takes the trainer's default)."""
    spec: dict[str, Any] = {"minReplicas": min_replicas, "maxReplicas": max_replicas}
    if (tp, pp) != (1, 1):
        spec["replica"] = {"tp": tp, "pp": pp}
    if checkpoint_dir is not None:
        spec["checkpointDir"] = checkpoint_dir
    spec["trainer"] = {k: v for k, v in trainer.items() if v is not None and v != {}}
    return {"apiVersion": API_VERSIONS[0], "kind": "ElasticJob", "metadata": {"name": name}, "spec": spec}


def train(
    name: Annotated[str, typer.Argument(help="The job's name (metadata.name).")],
    model: Annotated[str, typer.Option(help="Model preset: tiny, small, 1b.")] = "tiny",
    model_arg: Annotated[list[str] | None, typer.Option(help="A model knob, name=value (repeatable).")] = None,
    steps: Annotated[int | None, typer.Option(help="Optimizer steps.")] = None,
    global_batch: Annotated[int | None, typer.Option(help="Sequences per step over all replicas.")] = None,
    seq_len: Annotated[int | None, typer.Option(help="Tokens per sequence.")] = None,
    lr: Annotated[float | None, typer.Option(help="Peak learning rate.")] = None,
    data: Annotated[str | None, typer.Option(help="Token file every node can read (default: synthetic).")] = None,
    checkpoint_dir: Annotated[str | None, typer.Option(help="Shared checkpoint directory (elastic resume).")] = None,
    checkpoint_every: Annotated[int | None, typer.Option(help="Save every N steps.")] = None,
    export_path: Annotated[str | None, typer.Option(help="Where rank 0 writes the final weights.")] = None,
    eval_data: Annotated[str | None, typer.Option(help="Held-out token file the export is evaluated on.")] = None,
    min_replicas: Annotated[int, typer.Option(help="Fewest data-parallel replicas to run with.")] = 1,
    max_replicas: Annotated[int, typer.Option(help="Most data-parallel replicas.")] = 1,
    tp: Annotated[int, typer.Option(help="Tensor-parallel GPUs per replica.")] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline stages per replica.")] = 1,
    device: Annotated[str | None, typer.Option(help="auto, cpu or cuda.")] = None,
    defense: Annotated[
        str | None, typer.Option(help="none or gradient_compression: the gradient-leakage defense (docs/defense.md).")
    ] = None,
    param: Annotated[float | None, typer.Option(help="gradient_compression: share of coordinates sent.")] = None,
    defense_momentum: Annotated[float | None, typer.Option(help="Its momentum correction (0: off).")] = None,
    defense_exchange: Annotated[
        str | None, typer.Option(help="What the replicas exchange under the defense: gradient or update.")
    ] = None,
    defense_warmup_steps: Annotated[
        int | None, typer.Option(help="Steps over which the share sent ramps down to --param (0: none).")
    ] = None,
    defense_vocab_param: Annotated[
        float | None, typer.Option(help="Share of the vocabulary's rows drawn per step (default: --param).")
    ] = None,
    watermark: Annotated[
        str | None, typer.Option(help="Watermark key file on every node (mode 0600; never the key itself).")
    ] = None,
    nccl_algo: Annotated[
        str | None, typer.Option(help="NCCL's algorithm on GPU nodes: auto (NCCL's choice), ring or tree.")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the manifest; send nothing.")] = False,
    api: ApiOption = None,
) -> None:
    """Train a model as an elastic job built from flags (`myoloctl train --defense=... --param=...`).

    The manifest is checked here first (an error names its field and the flag, exit 2); --dry-run prints it (YAML) for `myoloctl apply -f`.
    """
    trainer = {
        "model": model,
        "modelArgs": _model_args(model_arg or []),
        "steps": steps,
        "globalBatch": global_batch,
        "seqLen": seq_len,
        "lr": lr,
        "dataPath": data,
        "checkpointEvery": checkpoint_every,
        "exportPath": export_path,
        "evalDataPath": eval_data,
        "device": device,
        "defense": defense,
        "defenseParam": param,
        "defenseMomentum": defense_momentum,
        "defenseExchange": defense_exchange,
        "defenseWarmupSteps": defense_warmup_steps,
        "defenseVocabParam": defense_vocab_param,
        "watermark": watermark,
        "ncclAlgo": nccl_algo,
    }
    doc = manifest(
        name, trainer, min_replicas=min_replicas, max_replicas=max_replicas, tp=tp, pp=pp, checkpoint_dir=checkpoint_dir
    )
    text = yaml.safe_dump(doc, sort_keys=False)
    try:
        parse_manifest(text)
    except ManifestError as exc:
        flag = FLAGS.get(exc.field)
        common.fail(escape(f"{exc}" + (f" (set by {flag})" if flag else "") + "; nothing was sent"))
    if dry_run:
        typer.echo(text, nl=False)
        return
    submit(text, api)
