"""ElasticJob manifests: the tiny-pretrain example and the training.myolo.ai/v1 form (``scalingPolicy``, no name) are
accepted; every error names its field."""

from __future__ import annotations

import pytest

from myolo.coordinator.jobs import units
from myolo.coordinator.jobs.manifest import MAX_MANIFEST_BYTES, ManifestError, Policy, parse_manifest

EXAMPLE = """
apiVersion: myolo.ai/v1
kind: ElasticJob
metadata: {name: tiny-pretrain}
spec:
  minReplicas: 1
  maxReplicas: 3
  replica: {tp: 1, pp: 1}          # one data-parallel replica = tp x pp GPUs; tp never crosses a node
  trainer: {model: {name: tiny}, optimizer: {steps: 400}, data: {globalBatch: 12, seqLen: 64}, runtime: {seed: 0}, checkpoint: {every: 20, snapshotEvery: 1}}
  checkpointDir: /srv/myolo/checkpoints/tiny-pretrain   # shared storage (NFS, JuiceFS) in production
  policies:
    - {metric: gpu_util, threshold: 75%, cooldown: 300s, action: scaleOut}
    - {metric: gradient_staleness, threshold: 10, action: scaleIn}
"""

TRAINING_V1 = """apiVersion: training.myolo.ai/v1
kind: ElasticJob
spec:
  minReplicas: 4
  maxReplicas: 32
  scalingPolicy:
  - metric: gpu_util
    threshold: 75%
    cooldown: 300s
  - metric: gradient_staleness
    threshold: 10
    action: scaleIn
"""


def test_the_example_manifest() -> None:
    spec = parse_manifest(EXAMPLE)
    assert (spec.name, spec.min_replicas, spec.max_replicas, spec.gpus_per_replica) == ("tiny-pretrain", 1, 3, 1)
    t = spec.trainer
    assert (
        t.model.name,
        t.optimizer.steps,
        t.data.global_batch,
        t.data.seq_len,
        t.checkpoint.every,
        t.checkpoint.snapshot_every,
    ) == (
        "tiny",
        400,
        12,
        64,
        20,
        1,
    )
    assert t.checkpoint.dir == "/srv/myolo/checkpoints/tiny-pretrain"
    assert spec.policies == (
        Policy(metric="gpu_util", threshold=75.0, action="scaleOut", window_s=60.0, cooldown_s=300.0),
        Policy(metric="gradient_staleness", threshold=10.0, action="scaleIn", window_s=60.0, cooldown_s=300.0),
    )


def test_the_training_v1_manifest_as_written() -> None:
    spec = parse_manifest(TRAINING_V1)
    assert spec.name.startswith("ejob-") and spec.name == parse_manifest(TRAINING_V1).name  # named by its content
    assert (spec.min_replicas, spec.max_replicas) == (4, 32)
    assert [(p.metric, p.threshold, p.action, p.cooldown_s) for p in spec.policies] == [
        ("gpu_util", 75.0, "scaleOut", 300.0),  # no action given: a busy job asks for more replicas
        ("gradient_staleness", 10.0, "scaleIn", 300.0),
    ]


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (("maxReplicas: 3", "maxReplicas: 0"), "spec.maxReplicas", ">= 1"),
        (("minReplicas: 1", "minReplicas: 4"), "spec.maxReplicas", "must be >= minReplicas (4)"),
        (("tp: 1, pp: 1", "tp: 1, pq: 1"), "spec.replica.pq", "unknown field"),
        (("seqLen: 64", "seqLen: 64, tp: 2"), "spec.trainer.data.tp", "spec.replica.tp"),
        (("runtime: {seed: 0}", "tp: 2, runtime: {seed: 0}"), "spec.trainer.tp", "spec.replica.tp"),
        (("name: tiny}", "name: 7}"), "spec.trainer.model.name", "Expected `str`"),
        (("runtime: {seed: 0}", "lr: 0.1"), "spec.trainer.lr", "did you mean spec.trainer.optimizer.lr?"),
        (("runtime: {seed: 0}", "quantBits: 8"), "spec.trainer.quantBits", "spec.trainer.quantization.bits?"),
        (("{model: {name: tiny}", "{model: tiny"), "spec.trainer.model", "did you mean spec.trainer.model.name?"),
        (("75%", "175%"), "spec.policies[0].threshold", "between 0% and 100%"),
        (("threshold: 10", "threshold: 10%"), "spec.policies[1].threshold", "not a percentage"),
        (("300s", "5 minutes"), "spec.policies[0].cooldown", "like 300s"),
        (("cooldown: 300s,", "cooldown: 300s, window: 0s,"), "spec.policies[0].window", "longer than 0 s"),
        (("metric: gpu_util", "metric: temperature"), "spec.policies[0].metric", "gpu_util"),
        (("{name: tiny-pretrain}", "{name: Tiny_Pretrain}"), "metadata.name", "DNS label"),
        (("kind: ElasticJob", "kind: Job"), "kind", "must be kind ElasticJob"),
        (("apiVersion: myolo.ai/v1", "apiVersion: v2"), "apiVersion", "use myolo.ai/v1"),
        (("  replica:", "  replicas: 3\n  replica:"), "spec.replicas", "unknown field"),
    ],
)
def test_errors_name_the_field(change: tuple[str, str], field: str, words: str) -> None:
    old, new = change
    assert old in EXAMPLE
    with pytest.raises(ManifestError) as err:
        parse_manifest(EXAMPLE.replace(old, new, 1))
    assert err.value.field == field, err.value
    assert words in err.value.reason, err.value


def test_the_global_batch_must_split_over_some_replica_count() -> None:
    text = EXAMPLE.replace("minReplicas: 1", "minReplicas: 2").replace("globalBatch: 12", "globalBatch: 7")
    with pytest.raises(ManifestError) as err:
        parse_manifest(text)
    assert (
        err.value.field == "spec.trainer.data.globalBatch"
        and "divisible by no replica count from 2 to 3" in err.value.reason
    )


def test_the_policies_are_given_once() -> None:
    both = EXAMPLE + "  scalingPolicy:\n    - {metric: gpu_util, threshold: 50%}\n"
    with pytest.raises(ManifestError) as err:
        parse_manifest(both)
    assert err.value.field == "spec.scalingPolicy"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a: &x [1, 2]\nb: *x\n", "anchors are not accepted"),
        ("x" * (MAX_MANIFEST_BYTES + 1), "the limit is"),
        ("kind: ElasticJob\n---\nkind: ElasticJob\n", "one YAML document"),
        ("- a\n- b\n", "expected a mapping"),
        ("a: [unclosed\n", "not valid YAML"),
        ("spec: " + "[" * 40 + "]" * 40 + "\n", "nested deeper"),
    ],
)
def test_hostile_text_is_refused_with_a_reason(text: str, words: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse_manifest(text)
    assert words in str(err.value)


def test_an_alias_bomb_is_refused_before_it_expands() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    with pytest.raises(ManifestError, match="anchors are not accepted"):
        parse_manifest(bomb)


@pytest.mark.parametrize(
    ("given", "seconds"),
    [("300s", 300.0), ("5m", 300.0), ("1h30m", 5400.0), ("250ms", 0.25), (90, 90.0), ("1.5h", 5400.0)],
)
def test_durations(given: object, seconds: float) -> None:
    assert units.duration_s(given) == seconds


@pytest.mark.parametrize("given", ["", "5 minutes", "-3s", True, "31d", [1]])
def test_bad_durations(given: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        units.duration_s(given)
