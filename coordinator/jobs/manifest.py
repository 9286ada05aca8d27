"""The ElasticJob manifest: YAML (or JSON) as operators write it, checked before anything is sent.

The shape is Kubernetes-like (``apiVersion``, ``kind``, ``metadata.name``, ``spec``); field names are
camelCase. The platform description's example is accepted as written: ``apiVersion: training.myolo.ai/v1`` as well as
``myolo.ai/v1``, ``scalingPolicy`` as another name for ``policies``, thresholds like ``75%`` and durations
like ``300s``, and a manifest without ``metadata`` (it is named after its content's hash).

Hostile input: the text is bounded in bytes, YAML anchors and aliases are refused (an alias bomb expands
exponentially), nesting is bounded, and every error names the field and what to change
(``spec.maxReplicas: must be >= minReplicas (4)``).
"""

from __future__ import annotations

import hashlib
import json
import re
import typing
from typing import Annotated, Any, Literal

import msgspec
import yaml

from myolo.common.errors import validation_problem
from myolo.coordinator.core.errors import Invalid
from myolo.coordinator.jobs import units
from myolo.events.payloads.trainer_flat import flat_fields
from myolo.events.payloads.trainer_job import Section, TrainerJob, TrainerJobError

MAX_MANIFEST_BYTES = 256 * 1024
MAX_DEPTH = 16
API_VERSIONS = ("myolo.ai/v1", "training.myolo.ai/v1")
# a watermark "path" that is a long hex or base64 word with no directory in it is a pasted key
_LOOKS_LIKE_A_KEY = re.compile(r"[0-9A-Fa-f]{32,}|[A-Za-z0-9+=_-]{40,}")
Metric = Literal["gpu_util", "gradient_staleness", "step_time", "tokens_per_s"]
Action = Literal["scaleOut", "scaleIn", "replace"]
# a metric above its threshold asks for this when the policy names no action
DEFAULT_ACTION: dict[str, Action] = {
    "gpu_util": "scaleOut",
    "gradient_staleness": "scaleIn",
    "step_time": "replace",
    "tokens_per_s": "scaleOut",
}
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=63, pattern=r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")]
Number = int | float
Quantity = int | float | Annotated[str, msgspec.Meta(max_length=32)]
# the trainer's fields a manifest sets outside spec.trainer: the layout (each generation's) and the runtime's
ELSEWHERE: dict[str, str] = {
    "parallelism.pp": "spec.replica.pp",
    "parallelism.tp": "spec.replica.tp",
    "parallelism.dp": "spec.minReplicas / spec.maxReplicas",
    "runtime.deterministic": "spec.runtime.deterministic",
}


class ManifestError(Invalid):
    """``field`` is the manifest path (``spec.replica.tp``; ``manifest`` for the whole); ``reason`` says what is
    wrong and what to do."""

    def __init__(self, field: str, reason: str) -> None:
        hint = "fix the manifest and apply it again (myoloctl apply checks it before sending)"
        super().__init__(f"{field}: {reason}" if field else reason, field=field or "manifest", hint=hint)
        self.reason = reason


def camel(name: str) -> str:
    """A field's name as a manifest spells it: ``warmup_steps`` -> ``warmupSteps``."""
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def _section_spec(section: type[Section]) -> type[msgspec.Struct]:
    """A section as a manifest writes it: its fields but those set elsewhere, camelCase."""
    return msgspec.defstruct(
        f"{section.__name__}Spec",
        [
            (
                f.name,
                f.type,
                f.default
                if f.default_factory is msgspec.NODEFAULT
                else msgspec.field(default_factory=f.default_factory),
            )
            for f in msgspec.structs.fields(section)
            if f"{section.key}.{f.name}" not in ELSEWHERE
        ],
        kw_only=True,
        frozen=True,
        forbid_unknown_fields=True,
        omit_defaults=True,
        rename=camel,
    )


# the trainer's job as a manifest writes it (spec.trainer.<section>.<field>): TrainerJob's sections, derived
SECTION_SPECS = {f.name: _section_spec(f.type) for f in msgspec.structs.fields(TrainerJob)}
TrainerSpec = msgspec.defstruct(
    "TrainerSpec",
    [(name, spec, spec()) for name, spec in SECTION_SPECS.items()],
    kw_only=True,
    forbid_unknown_fields=True,
    omit_defaults=True,
)


def manifest_field(path: str) -> str:
    """Where a trainer field is in a manifest: ``optimizer.warmup_steps`` -> ``spec.trainer.optimizer.warmupSteps``."""
    if path in ELSEWHERE:
        return ELSEWHERE[path]
    section, _, name = path.rpartition(".")
    return f"spec.trainer.{section}.{camel(name)}" if section else f"spec.trainer.{camel(name)}"


def trainer_spec(job: TrainerJob) -> dict[str, Any]:
    """``spec.trainer`` for ``job``: its sections camelCase, defaults left out, and without the fields a
    manifest sets elsewhere (ELSEWHERE: the layout, determinism), which the caller writes there if it needs."""
    sections = {
        name: {
            camel(k): v for k, v in msgspec.structs.asdict(getattr(job, name)).items() if f"{name}.{k}" not in ELSEWHERE
        }
        for name in SECTION_SPECS
    }
    written = msgspec.to_builtins(msgspec.convert(sections, TrainerSpec))  # checked, and its defaults dropped
    return {name: fields for name, fields in written.items() if fields}


def _trainer(spec: Any, deterministic: bool) -> TrainerJob:
    """The manifest's trainer sections as the job they describe (the layout left at 1/0)."""
    sections = {name: msgspec.structs.asdict(getattr(spec, name)) for name in SECTION_SPECS}
    sections["runtime"]["deterministic"] = deterministic
    return msgspec.convert(sections, TrainerJob)


class ReplicaSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One data-parallel replica: tp x pp GPUs. Tensor parallelism never crosses a node."""

    tp: Annotated[int, msgspec.Meta(ge=1, le=64)] = 1
    pp: Annotated[int, msgspec.Meta(ge=1, le=64)] = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.pp


class PolicySpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    metric: Metric
    threshold: Quantity
    action: Action | None = None
    window: Quantity = "60s"
    cooldown: Quantity = "300s"


class RuntimeSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How the workers run, beside what they train: ``deterministic`` (default on) gives bit-identical runs
    (deterministic kernels, cuBLAS's fixed workspace, seeded data order and dropout); off lets the fastest
    kernels run (cudnn.benchmark), which may move results in the last bits from run to run."""

    deterministic: bool = True


class Metadata(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: Name
    labels: Annotated[dict[Name, Annotated[str, msgspec.Meta(max_length=63)]], msgspec.Meta(max_length=32)] = {}


class SpecBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    min_replicas: Annotated[int, msgspec.Meta(ge=1, le=4096)]
    max_replicas: Annotated[int, msgspec.Meta(ge=1, le=4096)]
    replica: ReplicaSpec = msgspec.field(default_factory=ReplicaSpec)
    trainer: TrainerSpec = msgspec.field(default_factory=TrainerSpec)  # type: ignore[valid-type]
    runtime: RuntimeSpec = msgspec.field(default_factory=RuntimeSpec)
    checkpoint_dir: Annotated[str, msgspec.Meta(min_length=1, max_length=4096)] | None = None
    policies: Annotated[list[PolicySpec], msgspec.Meta(max_length=16)] = []
    scaling_policy: Annotated[list[PolicySpec], msgspec.Meta(max_length=16)] | None = None  # another name for policies
    max_restarts: Annotated[int, msgspec.Meta(ge=0, le=1000)] = 10


class Document(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    api_version: str
    kind: str
    spec: SpecBody
    metadata: Metadata | None = None


# ---- the checked result ---------------------------------------------------------------------------------


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    metric: Metric
    threshold: float  # in the metric's unit; gpu_util in percent
    action: Action
    window_s: float
    cooldown_s: float


class ElasticJobSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What the jobs component schedules: the manifest, checked and normalised."""

    name: str
    min_replicas: int
    max_replicas: int
    tp: int
    pp: int
    trainer: TrainerJob  # the layout fields left at 1/0: each generation sets them
    policies: tuple[Policy, ...] = ()
    max_restarts: int = 10
    labels: dict[str, str] = {}

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp


def parse_manifest(text: str | bytes) -> ElasticJobSpec:
    """Parse and check a manifest; :class:`ManifestError` names the first problem's field."""
    raw = text.encode() if isinstance(text, str) else text
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ManifestError("", f"the manifest is {len(raw)} bytes; the limit is {MAX_MANIFEST_BYTES}")
    data = load_yaml(raw)
    _check_depth(data, MAX_DEPTH)
    try:
        doc = msgspec.convert(data, Document, strict=True)
    except msgspec.ValidationError as exc:
        raise _validation_error(exc) from None
    return _checked(doc, raw)


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors and aliases (a few lines of aliases expand to gigabytes)."""

    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise ManifestError(
                "", f"YAML aliases are not accepted (line {event.start_mark.line + 1}): write values out"
            )
        event = self.peek_event()
        if getattr(event, "anchor", None):
            raise ManifestError(
                "", f"YAML anchors are not accepted (line {event.start_mark.line + 1}): write values out"
            )
        return super().compose_node(parent, index)


def load_yaml(raw: bytes) -> Any:
    try:
        docs = [d for d in yaml.load_all(raw, Loader=_NoAliasLoader) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError("", f"not valid YAML: {exc}") from None
    if len(docs) != 1:
        raise ManifestError("", f"expected one YAML document, found {len(docs)}")
    if not isinstance(docs[0], dict):
        raise ManifestError(
            "", f"expected a mapping with apiVersion, kind, metadata and spec, got {type(docs[0]).__name__}"
        )
    return docs[0]


def _check_depth(value: Any, limit: int, path: str = "") -> None:
    if limit < 0:
        raise ManifestError(path.lstrip("."), f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_depth(v, limit - 1, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_depth(v, limit - 1, f"{path}[{i}]")


def _validation_error(exc: msgspec.ValidationError) -> ManifestError:
    problem = validation_problem(exc)
    field, msg = problem.field.lstrip("."), problem.message
    if problem.kind == "unknown":
        msg = "unknown field" + _unknown_hint(problem.parent, field.rsplit(".", 1)[-1])
    elif problem.kind == "missing":
        msg = "missing: this field is required"
    elif msg.startswith("Invalid enum value") and (choices := _CHOICES.get(field.rsplit(".", 1)[-1].split("[")[0])):
        msg = f"{msg}; choose one of {', '.join(choices)}"
    elif (old := _flat_section(field)) is not None and msg.startswith("Expected `object`"):
        msg = f"{msg}: {field} is a section of fields now; did you mean {manifest_field(old)}?"
    elif field == "metadata.name" and "regex" in msg:
        msg = "must be a lowercase name of letters, digits and '-' (a DNS label), starting and ending alphanumeric"
    return ManifestError(field, msg)


def _flat_section(field: str) -> str | None:
    """The field a section's name was in the flat form (``spec.trainer.model`` -> ``model.name``), if any."""
    section = field.removeprefix("spec.trainer.")
    old = flat_fields().get(section) if field.startswith("spec.trainer.") else None
    return old.path if old is not None else None


def _unknown_hint(parent: str, name: str) -> str:
    """Where an unknown spec.trainer field is set instead: elsewhere in the manifest, or in a section (a flat
    name, from before the sections, points at its field)."""
    if not parent.startswith(".spec.trainer"):
        return ""
    section, snake = parent.removeprefix(".spec.trainer").lstrip("."), _snake(name)
    old = flat_fields().get(snake)
    elsewhere = [where for path, where in ELSEWHERE.items() if path.rpartition(".")[2] == snake]
    if old is not None and old.path in ELSEWHERE:
        elsewhere = [ELSEWHERE[old.path]]
    if elsewhere:
        return f" (it is {elsewhere[0]})"
    homes = [
        manifest_field(f"{s}.{snake}")
        for s, spec in SECTION_SPECS.items()
        if name in {f.encode_name for f in msgspec.structs.fields(spec)}
    ]
    if not section and old is not None and manifest_field(old.path) not in homes:
        homes.insert(0, manifest_field(old.path))  # the flat form's name (quantBits: quantization.bits)
    if homes:
        return f" (did you mean {' or '.join(homes)}?)"
    if not section:
        return f"; spec.trainer's sections are {', '.join(SECTION_SPECS)}"
    return ""


_CHOICES: dict[str, tuple[str, ...]] = {"metric": typing.get_args(Metric), "action": typing.get_args(Action)}


def _checked(doc: Document, raw: bytes) -> ElasticJobSpec:
    if doc.api_version not in API_VERSIONS:
        raise ManifestError("apiVersion", f"{doc.api_version!r} is not supported; use {API_VERSIONS[0]}")
    if doc.kind != "ElasticJob":
        raise ManifestError("kind", f"{doc.kind!r} is not supported; this manifest must be kind ElasticJob")
    spec = doc.spec
    if spec.max_replicas < spec.min_replicas:
        raise ManifestError("spec.maxReplicas", f"must be >= minReplicas ({spec.min_replicas})")
    if spec.scaling_policy is not None and spec.policies:
        raise ManifestError("spec.scalingPolicy", "give the policies once: as spec.policies or spec.scalingPolicy")
    where = "spec.scalingPolicy" if spec.scaling_policy is not None else "spec.policies"
    policies = tuple(_policy(p, f"{where}[{i}]") for i, p in enumerate(spec.scaling_policy or spec.policies))
    trainer = _trainer(spec.trainer, spec.runtime.deterministic)
    if trainer.watermark.key_file is not None and _LOOKS_LIKE_A_KEY.fullmatch(trainer.watermark.key_file):
        raise ManifestError(
            "spec.trainer.watermark.keyFile",
            "names the watermark's key file on the nodes, never the key: this value looks like a key itself "
            "(a manifest is stored and shown); put the key in a file (mode 0600) and give its path",
        )
    if spec.checkpoint_dir is not None:
        if trainer.checkpoint.dir not in (None, spec.checkpoint_dir):
            raise ManifestError(
                "spec.trainer.checkpoint.dir", "set the checkpoint directory once, as spec.checkpointDir"
            )
        checkpoint = msgspec.structs.replace(trainer.checkpoint, dir=spec.checkpoint_dir)
        trainer = msgspec.structs.replace(trainer, checkpoint=checkpoint)
    try:
        trainer.validate()
    except TrainerJobError as exc:
        raise ManifestError(manifest_field(exc.field) if exc.field else "spec.trainer", exc.reason) from None
    usable = [r for r in range(spec.min_replicas, spec.max_replicas + 1) if trainer.data.global_batch % r == 0]
    if not usable:
        raise ManifestError(
            "spec.trainer.data.globalBatch",
            f"{trainer.data.global_batch} is divisible by no replica count from {spec.min_replicas} to "
            f"{spec.max_replicas}: the global batch is split evenly over the replicas; use a multiple of "
            f"{spec.min_replicas}",
        )
    name = doc.metadata.name if doc.metadata else f"ejob-{hashlib.sha256(raw).hexdigest()[:10]}"
    return ElasticJobSpec(
        name=name,
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
        tp=spec.replica.tp,
        pp=spec.replica.pp,
        trainer=trainer,
        policies=policies,
        max_restarts=spec.max_restarts,
        labels=dict(doc.metadata.labels) if doc.metadata else {},
    )


def _policy(p: PolicySpec, field: str) -> Policy:
    try:
        value, percent = units.threshold(p.threshold)
    except ValueError as exc:
        raise ManifestError(f"{field}.threshold", str(exc)) from None
    if percent and p.metric != "gpu_util":
        raise ManifestError(f"{field}.threshold", f"{p.metric} is not a percentage: give a plain number")
    out: dict[str, float] = {}
    for key in ("window", "cooldown"):
        try:
            out[key] = units.duration_s(getattr(p, key))
        except ValueError as exc:
            raise ManifestError(f"{field}.{key}", str(exc)) from None
    if out["window"] <= 0:
        raise ManifestError(f"{field}.window", "must be longer than 0 s: the metric is averaged over it")
    return Policy(
        metric=p.metric,
        threshold=value,
        action=p.action or DEFAULT_ACTION[p.metric],
        window_s=out["window"],
        cooldown_s=out["cooldown"],
    )


def spec_json(spec: ElasticJobSpec) -> str:
    """A stable rendering (for ``myoloctl get jobs -o json`` and the state topic's tests)."""
    return json.dumps(msgspec.to_builtins(spec), sort_keys=True)
