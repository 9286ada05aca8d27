"""The registry component without a broker: registration (recorded before its events, idempotent per run and per
artifact), challenger and auto-promotion (margin, same eval dataset), alias history (who, when, why; bounded),
standbys refusing writes and rebuilding the leader's view from the state topic, bounds and field errors."""

from __future__ import annotations

import math

import msgspec
import pytest

from myolo.coordinator.core.errors import NotLeader
from myolo.coordinator.registry import records
from myolo.coordinator.registry.component import Registry
from myolo.coordinator.registry.errors import RegistryError, RegistryFull, UnknownAlias, UnknownModel, UnknownVersion
from myolo.coordinator.registry.interface import ModelRegistry, NewVersion
from myolo.coordinator.registry.records import (
    CHALLENGER,
    CHAMPION,
    STATE_REGISTRY,
    AliasRecord,
    ModelRecord,
    RetrainTemplate,
    VersionRecord,
)
from myolo.events.payloads import ModelAliasSet, ModelExport, ModelRegistered
from myolo.events.payloads.models import Quantization
from tests.support.coordinator.offline import offline_coordinator
from tests.support.coordinator.registry import (
    HELD_OUT,
    OTHER_SET,
    TEMPLATE,
    Leading,
    evaluated,
    new,
    replay,
    sha,
)

OLIVE = "operator:olive"


@pytest.fixture
async def lead(tmp_path) -> Leading:
    return await Leading(tmp_path).lead()


def test_the_component_provides_the_interface_other_components_ask_for(tmp_path) -> None:
    coord = offline_coordinator(tmp_path)
    assert isinstance(coord.get(ModelRegistry), Registry)


# ---- registration -------------------------------------------------------------------------------------------
async def test_a_registration_is_recorded_then_announced_and_becomes_challenger(lead: Leading) -> None:
    reg = lead.registry
    version = await reg.register("credit-risk", new("a", 2.0, description="first"), OLIVE)
    assert (version.model, version.version, version.source, version.by, version.announced) == (
        "credit-risk",
        1,
        "external",
        OLIVE,
        True,
    )
    model = reg.model("credit-risk")
    assert model is not None and model.latest_version == 1 and model.retrain is None  # created without a template
    # order: the model, the version, then its event; the challenger's record, then its event; the version announced
    kinds = [type(r).__name__ for _, r in lead.writes]
    assert kinds == [
        "ModelRecord",
        "VersionRecord",
        "ModelRegistered",
        "AliasRecord",
        "ModelAliasSet",
        "VersionRecord",
    ]
    assert [t for t, _ in lead.writes] == [
        STATE_REGISTRY,
        STATE_REGISTRY,
        "send",
        STATE_REGISTRY,
        "send",
        STATE_REGISTRY,
    ]
    registered = lead.events()[0]
    assert isinstance(registered, ModelRegistered)
    assert (registered.model, registered.version, registered.sha256, registered.by) == (
        "credit-risk",
        1,
        sha("a"),
        OLIVE,
    )
    assert registered.metrics == {"loss": 2.0, "perplexity": pytest.approx(math.exp(2.0))}
    alias = lead.events()[1]
    assert isinstance(alias, ModelAliasSet)
    assert (alias.alias, alias.version, alias.previous, alias.by) == (CHALLENGER, 1, None, "auto")
    assert reg.alias("credit-risk", CHALLENGER).version == 1
    assert reg.champion("credit-risk") is None  # nobody promoted it


async def test_the_evaluation_is_kept_in_the_model_cards_model_index_shape(lead: Leading) -> None:
    version = await lead.registry.register("credit-risk", new("a", 2.0), OLIVE)
    (entry,) = version.model_index
    (result,) = entry.results
    assert entry.name == "credit-risk"
    assert (result.task.type, result.dataset.type, result.dataset.revision) == (
        "text-generation",
        "/data/heldout.bin",
        evaluated(2.0).dataset_sha256,
    )
    assert [(m.type, round(m.value, 3)) for m in result.metrics] == [("loss", 2.0), ("perplexity", 7.389)]
    assert result.dataset.args == {"tokens": 4096}


async def test_registering_a_run_twice_returns_the_version_it_became(lead: Leading) -> None:
    """Events come at least once: the same job and generation is one version, whatever else differs."""
    reg = lead.registry
    first = await reg.register("m", new("run", 2.0, job="m-retrain-1", generation=3), "auto")
    before = len(lead.writes)
    again = await reg.register("m", new("run-copy", 1.0, job="m-retrain-1", generation=3), "auto")
    assert again == first and len(lead.writes) == before  # nothing written, nothing sent
    other = await reg.register("m", new("run", 2.0, job="m-retrain-1", generation=4), "auto")
    assert other.version == 2  # another generation of the job is another version
    external = await reg.register("m", new("ext"), OLIVE)
    assert await reg.register("m", new("ext", description="again"), OLIVE) == external
    assert reg.registered("m", new("ext")) == external and reg.registered("m", new("nope")) is None


async def test_a_registration_whose_events_failed_is_finished_on_retry(lead: Leading) -> None:
    """The broker takes the state but fails the event: the version is recorded, not announced; the retry
    (the drift component's, on the redelivered completion) sends what is missing and marks it announced."""
    reg = lead.registry
    producer = lead.coord.get(Registry).ctx.producer
    real = producer.send
    calls = {"n": 0}

    async def failing(payload, topic=None):
        calls["n"] += 1
        raise ConnectionError("broker away (test)")

    producer.send = failing  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        await reg.register("m", new("a", job="j", generation=1), "auto")
    held = reg.version("m", 1)
    assert held is not None and not held.announced and reg.alias("m", CHALLENGER) is None
    producer.send = real  # type: ignore[method-assign]
    done = await reg.register("m", new("a", job="j", generation=1), "auto")
    assert done.version == 1 and done.announced and reg.alias("m", CHALLENGER).version == 1
    assert [type(e).__name__ for e in lead.events()] == ["ModelRegistered", "ModelAliasSet"]


async def test_the_leaders_tick_finishes_an_unannounced_version(lead: Leading) -> None:
    reg = lead.registry
    producer = reg.ctx.producer
    real = producer.send

    async def failing(payload, topic=None):
        raise ConnectionError("broker away (test)")

    producer.send = failing  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        await reg.register("m", new("a"), OLIVE)
    await lead.coord.tick()  # still away: logged, tried again next tick
    assert not reg.version("m", 1).announced
    producer.send = real  # type: ignore[method-assign]
    await lead.coord.tick()
    assert reg.version("m", 1).announced and reg.alias("m", CHALLENGER).version == 1


async def test_from_export_carries_what_the_job_exported(lead: Leading) -> None:
    export = ModelExport(
        artifact="/srv/a/m-retrain-1/model.safetensors",
        sha256=sha("x"),
        size_bytes=1234,
        model="tiny",
        steps=400,
        data_sha256=sha("data"),
        eval=evaluated(1.5),
    )
    await lead.registry.register("m", new("root"), OLIVE)
    v = await lead.registry.register(
        "m", NewVersion.from_export(export, job="m-retrain-1", generation=2, parent=1, drift_event="d-9"), "auto"
    )
    assert (v.source, v.job, v.generation, v.steps, v.size_bytes, v.data_sha256, v.parent, v.drift_event) == (
        "job",
        "m-retrain-1",
        2,
        400,
        1234,
        sha("data"),
        1,
        "d-9",
    )
    assert [x.version for x in lead.registry.lineage("m", 2)] == [2, 1]


# ---- auto-promotion -----------------------------------------------------------------------------------------
async def _with_champion(lead: Leading, margin: float | None, loss: float = 2.0) -> None:
    await lead.registry.put_model("m", "", None, margin, "operator:ada")
    await lead.registry.register("m", new("champ", loss), OLIVE)
    await lead.registry.set_alias("m", CHAMPION, 1, OLIVE, "first release")


async def test_a_version_better_by_the_margin_is_promoted_by_auto_naming_both_losses(lead: Leading) -> None:
    await _with_champion(lead, 0.05)
    close = await lead.registry.register("m", new("close", 1.95), "auto")  # 2.5% better: not enough
    assert lead.registry.champion("m").version == 1
    assert close.auto_promotion == (
        "not promoted: held-out loss 1.9500, champion v1's 2.0000: 2.50% lower; promote_margin asks 5.00%"
    )
    better = await lead.registry.register("m", new("better", 1.8), "auto")  # 10% better
    assert lead.registry.champion("m").version == better.version == 3
    change = lead.registry.alias("m", CHAMPION).history[-1]
    assert (change.version, change.previous, change.by) == (3, 1, "auto")
    assert "1.8000" in change.reason and "2.0000" in change.reason and "10.00% lower" in change.reason
    events = [e for e in lead.events() if isinstance(e, ModelAliasSet) and e.alias == CHAMPION]
    assert [(e.version, e.previous, e.by) for e in events] == [(1, None, OLIVE), (3, 1, "auto")]
    assert lead.registry.alias("m", CHALLENGER).version == 3


async def test_no_promotion_on_another_eval_dataset_or_without_a_margin(lead: Leading) -> None:
    await _with_champion(lead, 0.01)
    elsewhere = new("elsewhere", eval=evaluated(0.5, OTHER_SET))
    v = await lead.registry.register("m", elsewhere, "auto")
    assert lead.registry.champion("m").version == 1
    assert "losses on different data do not compare" in v.auto_promotion
    unknown = await lead.registry.register("m", new("no-sha", eval=evaluated(0.5, None)), "auto")
    assert "no held-out evaluation" in unknown.auto_promotion and lead.registry.champion("m").version == 1
    await lead.registry.put_model("m", "", None, None, "operator:ada")  # operators promote
    manual = await lead.registry.register("m", new("manual", 0.1), "auto")
    assert manual.auto_promotion is None and lead.registry.champion("m").version == 1


async def test_without_a_champion_nothing_is_promoted(lead: Leading) -> None:
    await lead.registry.put_model("m", "", None, 0.0, "operator:ada")
    v = await lead.registry.register("m", new("a", 1.0), "auto")
    assert lead.registry.champion("m") is None and "no champion to compare with" in v.auto_promotion


# ---- quantized versions -------------------------------------------------------------------------------------
def quantized_of(
    source: str, loss: float, source_loss: float = 2.0, dataset: str | None = None, name: str = "int4"
) -> NewVersion:
    """A quantized model (artifact ``<source>-<name>``) of the version whose artifact is ``source``, evaluated
    beside it on the same tokens."""
    q = Quantization(
        scheme="gptq", bits=4, group_size=64, layers=28, bits_per_weight=4.5, calib_sha256=sha("calib"),
        calib_tokens=32768, source_sha256=sha(source), source_eval=evaluated(source_loss, dataset or HELD_OUT),
    )  # fmt: skip
    return new(f"{source}-{name}", loss, parent=1, quantization=q)


async def test_a_quantized_version_is_judged_against_its_source_within_quantize_margin(lead: Leading) -> None:
    await lead.registry.put_model("m", "", None, 0.01, "operator:ada", quantize_margin=0.03)
    await lead.registry.register("m", new("champ", 2.0), OLIVE)
    await lead.registry.set_alias("m", CHAMPION, 1, OLIVE, "first release")
    # 2.0 -> 2.05 nats is +5.1 % perplexity: beyond the 3 % margin; never judged by promote_margin (it is worse)
    far = await lead.registry.register("m", quantized_of("champ", 2.05), "auto")
    assert lead.registry.champion("m").version == 1
    assert far.auto_promotion.startswith("not promoted: held-out perplexity 7.7679, its source v1's 7.3891")
    assert far.auto_promotion.endswith("+5.13%; quantize_margin allows 3.00%")
    assert far.quantization is not None and far.quantization.scheme == "gptq" and far.parent == 1
    near = await lead.registry.register("m", quantized_of("champ", 2.02, name="g32"), "auto")  # +2.0 %
    assert lead.registry.champion("m").version == near.version == 3
    assert near.auto_promotion.startswith("auto-promoted: held-out perplexity")
    assert "(quantize_margin 3.00%)" in lead.registry.alias("m", CHAMPION).history[-1].reason


async def test_a_quantized_version_is_never_promoted_without_a_sound_comparison(lead: Leading) -> None:
    await lead.registry.put_model("m", "", None, 0.5, "operator:ada")  # no quantize_margin
    await lead.registry.register("m", new("champ", 2.0), OLIVE)
    await lead.registry.set_alias("m", CHAMPION, 1, OLIVE, "first release")
    better = await lead.registry.register("m", quantized_of("champ", 1.0, name="a"), "auto")  # not promote_margin
    assert "the model has none" in better.auto_promotion and lead.registry.champion("m").version == 1
    await lead.registry.put_model("m", "", None, 0.5, "operator:ada", quantize_margin=0.05)
    cases = {
        "other bytes": (quantized_of("something-else", 2.0), "it was quantized from bytes"),
        "other data": (quantized_of("champ", 2.0, dataset=OTHER_SET, name="b"), "evaluated on different data"),
    }
    for what, (version, says) in cases.items():
        v = await lead.registry.register("m", version, "auto")
        assert says in v.auto_promotion, what
    await lead.registry.register("m", new("other", 1.9), OLIVE)
    child = await lead.registry.register(
        "m", msgspec.structs.replace(quantized_of("other", 1.9, 1.9), parent=5), "auto"
    )
    assert "its source v5 is not the champion (v1 is)" in child.auto_promotion
    assert lead.registry.champion("m").version == 1
    assert (await lead.registry.put_model("m", "", None, None, "operator:ada")).quantize_margin is None
    with pytest.raises(RegistryError) as bad:
        await lead.registry.put_model("m", "", None, None, "operator:ada", quantize_margin=1.5)
    assert bad.value.field == "quantize_margin"


async def test_from_export_carries_the_quantization(lead: Leading) -> None:
    q = quantized_of("champ", 2.0).quantization
    export = ModelExport(
        artifact="/srv/q.safetensors", sha256=sha("q"), size_bytes=9, model="tiny", steps=4, quantization=q
    )
    assert NewVersion.from_export(export, job="m-quantize-1", generation=0, parent=1).quantization == q


# ---- aliases ------------------------------------------------------------------------------------------------
async def test_alias_history_says_who_moved_it_when_and_why(lead: Leading) -> None:
    reg = lead.registry
    for name in ("a", "b", "c"):
        await reg.register("m", new(name), OLIVE)
    await reg.set_alias("m", CHAMPION, 2, OLIVE, "v2 passed the shadow test")
    await lead.clock.advance(60)
    await reg.set_alias("m", CHAMPION, 3, "operator:ada", "v3 is 4% better")
    await lead.clock.advance(60)
    unchanged = await reg.set_alias("m", CHAMPION, 3, OLIVE, "again")
    assert len(unchanged.history) == 2  # pointing it where it points changes nothing
    rolled = await reg.set_alias("m", CHAMPION, 2, OLIVE, "v3 doubled p99 latency: roll back")
    t0 = rolled.history[0].when
    assert [(c.version, c.previous, c.by, c.when - t0, c.reason) for c in rolled.history] == [
        (2, None, OLIVE, 0.0, "v2 passed the shadow test"),
        (3, 2, "operator:ada", 60.0, "v3 is 4% better"),
        (2, 3, OLIVE, 120.0, "v3 doubled p99 latency: roll back"),
    ]
    assert rolled.version_at(t0 + 90) == 3 and rolled.version_at(t0 - 1) is None  # what was champion when
    removed = await reg.set_alias("m", "staging", 1, OLIVE, "try it")
    assert removed.version == 1
    gone = await reg.set_alias("m", "staging", None, OLIVE, "done trying")
    assert gone.version is None and gone.history[-1].previous == 1
    assert await reg.set_alias("m", "staging", None, OLIVE, "twice") == gone  # removing twice changes nothing
    assert [a.alias for a in reg.aliases("m")] == [CHALLENGER, CHAMPION, "staging"]


async def test_history_keeps_the_newest_entries_and_counts_the_rest(lead: Leading) -> None:
    reg = lead.registry
    await reg.register("m", new("a"), OLIVE)
    await reg.register("m", new("b"), OLIVE)
    for i in range(records.HISTORY_MAX + 3):
        await reg.set_alias("m", "canary", 1 + i % 2, OLIVE, f"move {i}")
    held = reg.alias("m", "canary")
    assert len(held.history) == records.HISTORY_MAX and held.dropped == 3
    assert held.history[0].reason == "move 3" and held.history[-1].reason == f"move {records.HISTORY_MAX + 2}"


async def test_alias_refusals_name_the_field(lead: Leading) -> None:
    reg = lead.registry
    with pytest.raises(UnknownModel) as missing:
        await reg.set_alias("nope", CHAMPION, 1, OLIVE, "why")
    assert missing.value.field == "model"
    await reg.register("credit-risk", new("a"), OLIVE)
    with pytest.raises(UnknownVersion) as no_version:
        await reg.set_alias("credit-risk", CHAMPION, 9, OLIVE, "why")
    assert str(no_version.value) == (
        "version: model credit-risk has no version 9 (myoloctl registry versions credit-risk lists them)"
    )
    with pytest.raises(RegistryError) as no_reason:
        await reg.set_alias("credit-risk", CHAMPION, 1, OLIVE, "  ")
    assert no_reason.value.field == "reason" and "required" in no_reason.value.reason
    with pytest.raises(RegistryError) as bad:
        await reg.set_alias("credit-risk", "9lives", 1, OLIVE, "why")
    assert bad.value.field == "alias" and "is not an alias name" in str(bad.value)
    with pytest.raises(UnknownAlias):
        await reg.set_alias("credit-risk", "never-set", None, OLIVE, "why")


# ---- leadership and replay ----------------------------------------------------------------------------------
async def test_a_standby_refuses_every_write(tmp_path) -> None:
    standby = Leading(tmp_path)  # never leads
    reg = standby.registry
    with pytest.raises(NotLeader):
        await reg.register("m", new("a"), OLIVE)
    with pytest.raises(NotLeader):
        await reg.set_alias("m", CHAMPION, 1, OLIVE, "why")
    with pytest.raises(NotLeader):
        await reg.put_model("m", "", None, None, OLIVE)
    assert standby.writes == []


async def test_a_standby_rebuilt_from_the_state_topic_answers_as_the_leader(lead: Leading, tmp_path) -> None:
    reg = lead.registry
    await reg.put_model(
        "m", "risk model", RetrainTemplate(manifest=TEMPLATE, artifact_dir="/srv/a"), 0.02, "operator:ada"
    )
    await reg.register("m", new("a", 2.0), OLIVE)
    await reg.set_alias("m", CHAMPION, 1, OLIVE, "first")
    await reg.register("m", new("b", 1.5, parent=1, job="m-retrain-1", generation=1, drift_event="d1"), "auto")
    await reg.register("n", new("x"), OLIVE)
    (tmp_path / "standby").mkdir()
    standby = offline_coordinator(tmp_path / "standby")
    replay(lead.state(), standby)
    other: Registry = standby.get(Registry)
    assert other.models() == reg.models() and len(other.models()) == 2
    for name in ("m", "n"):
        assert other.versions(name) == reg.versions(name)
        assert other.aliases(name) == reg.aliases(name)
    assert other.champion("m").version == 2  # auto-promoted, as the leader decided
    assert [v.version for v in other.lineage("m", 2)] == [2, 1]
    assert other.registered("m", new("b", job="m-retrain-1", generation=1)).version == 2
    assert other.view.unannounced == set()  # every version was announced before it was written as such


async def test_what_the_state_topic_holds_decodes_as_written(lead: Leading) -> None:
    """Every record goes through the real state codec (JSON): nothing the registry writes fails to read back."""
    await lead.registry.register("m", new("a", 2.0, tags={"team": "risk"}), OLIVE)
    codec = lead.coord.store.codec
    for record in lead.state():
        value, headers = codec.encode(record)
        assert codec.decode(value, headers) == record


# ---- bounds and bad input -----------------------------------------------------------------------------------
async def test_bounds_are_refused_naming_the_bound(tmp_path) -> None:
    lead = await Leading(
        tmp_path,
        MYOLO_REGISTRY_MAX_MODELS="2",
        MYOLO_REGISTRY_MAX_VERSIONS_PER_MODEL="2",
        MYOLO_REGISTRY_MAX_ALIASES_PER_MODEL="1",
    ).lead()
    reg = lead.registry
    await reg.register("a", new("a1"), OLIVE)
    await reg.register("a", new("a2"), OLIVE)
    with pytest.raises(RegistryFull) as versions:
        await reg.register("a", new("a3"), OLIVE)
    assert versions.value.field == "model" and "registry.max_versions_per_model" in str(versions.value)
    await reg.put_model("b", "", None, None, OLIVE)
    with pytest.raises(RegistryFull) as models:
        await reg.register("c", new("c1"), OLIVE)
    assert "registry.max_models" in str(models.value)
    with pytest.raises(RegistryFull):
        await reg.put_model("c", "", None, None, OLIVE)
    await reg.set_alias("a", "staging", 1, OLIVE, "why")
    await reg.set_alias("a", CHAMPION, 1, OLIVE, "champion and challenger never count")
    with pytest.raises(RegistryFull) as aliases:
        await reg.set_alias("a", "canary", 1, OLIVE, "why")
    assert aliases.value.field == "alias" and "registry.max_aliases_per_model" in str(aliases.value)


@pytest.mark.parametrize(
    ("model", "version", "field", "words"),
    [
        ("bad name!", new("a"), "model", "is not a model name"),
        ("x" * 129, new("a"), "model", "is not a model name"),
        ("a:b", new("a"), "model", "is not a model name"),  # ':' and '@' would make keys ambiguous
        ("m", new("a", parent=7), "parent", "model m has no version 7"),
        ("m", NewVersion(artifact="/a", sha256="XYZ"), "sha256", "Expected `str` matching regex"),
        ("m", new("a", metrics={"loss": float("nan")}), "metrics.loss", "is not a finite number"),
        ("m", new("a", eval=evaluated(float("inf"))), "eval.loss", "is not a finite number"),
        ("m", new("a", job="j"), "generation", "give a job and its generation together"),
        ("m", new("a", tags={"bad tag": "x"}), "tags", "Expected `str` matching regex"),
    ],
)
async def test_a_bad_registration_names_the_field(
    lead: Leading, model: str, version: NewVersion, field: str, words: str
) -> None:
    with pytest.raises((RegistryError, UnknownVersion)) as exc:
        await lead.registry.register(model, version, OLIVE)
    assert exc.value.field.startswith(field) and words in str(exc.value), exc.value
    assert lead.writes == []


# ---- models and retraining templates ------------------------------------------------------------------------
async def test_put_model_records_the_template_and_changes_only_what_changed(lead: Leading) -> None:
    reg = lead.registry
    template = RetrainTemplate(manifest=TEMPLATE, artifact_dir="/srv/a", from_champion=False, cooldown_s=600)
    created = await reg.put_model("m", "risk", template, 0.02, "operator:ada")
    assert (created.retrain, created.promote_margin, created.by) == (template, 0.02, "operator:ada")
    writes = len(lead.writes)
    assert await reg.put_model("m", "risk", template, 0.02, OLIVE) == created and len(lead.writes) == writes
    await lead.clock.advance(5)
    cleared = await reg.put_model("m", "risk model", None, None, OLIVE)
    assert (cleared.retrain, cleared.promote_margin, cleared.by, cleared.created) == (
        None,
        None,
        OLIVE,
        created.created,
    )
    assert cleared.updated == created.updated + 5


@pytest.mark.parametrize(
    ("manifest", "words"),
    [
        (
            TEMPLATE.replace("{labels: {team: risk}}", "{name: fixed}"),
            "metadata.name must not be set: each retraining run sets it",
        ),
        (
            TEMPLATE.replace("{steps: 100}", "{steps: 100}, checkpoint: {exportPath: /x}"),
            "checkpoint.exportPath must not",
        ),
        (
            TEMPLATE.replace("{steps: 100}", "{steps: 100}, checkpoint: {initFrom: /w}"),
            "checkpoint.initFrom must not be",
        ),
        (TEMPLATE.replace("maxReplicas: 2", "maxReplicas: 0"), "spec.maxReplicas: Expected `int` >= 1"),
        (TEMPLATE.replace("kind: ElasticJob", "kind: Pod"), "kind: 'Pod' is not supported"),
        ("a: &x [1]\nb: *x\n", "YAML anchors are not accepted"),
        ("- just\n- a list\n", "expected a mapping"),
    ],
)
async def test_a_bad_template_is_refused_naming_retrain_manifest(lead: Leading, manifest: str, words: str) -> None:
    with pytest.raises(RegistryError) as exc:
        await lead.registry.put_model(
            "m", "", RetrainTemplate(manifest=manifest, artifact_dir="/srv/a"), None, "operator:ada"
        )
    assert exc.value.field == "retrain.manifest" and words in exc.value.reason, exc.value
    assert lead.writes == []


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({"promote_margin": 1.0}, "promote_margin", "is not a fraction in [0, 1)"),
        ({"promote_margin": -0.1}, "promote_margin", "is not a fraction"),
        ({"description": "x" * 2001}, "description", "at most 2000"),
        ({"retrain": RetrainTemplate(manifest=TEMPLATE, artifact_dir="")}, "retrain.artifact_dir", "length >= 1"),
        (
            {"retrain": RetrainTemplate(manifest=TEMPLATE, artifact_dir="/a", cooldown_s=-1)},
            "retrain.cooldown_s",
            ">= 0",
        ),
    ],
)
async def test_model_settings_out_of_bounds_name_the_field(lead: Leading, kwargs: dict, field: str, words: str) -> None:
    args = {"description": "", "retrain": None, "promote_margin": None} | kwargs
    with pytest.raises(RegistryError) as exc:
        await lead.registry.put_model("m", args["description"], args["retrain"], args["promote_margin"], OLIVE)
    assert exc.value.field == field and words in exc.value.reason, exc.value


def test_records_are_keyed_so_one_key_names_one_record() -> None:
    v = VersionRecord(model="m.v2", version=3, created=0, by="a", source="external", artifact="/a", sha256=sha("a"))
    a = AliasRecord(model="m.v2", alias="champion")
    m = ModelRecord(name="m.v2", created=0, updated=0, by="a")
    assert [records.key_of(r) for r in (m, v, a)] == ["m.v2", "m.v2:3", "m.v2@champion"]
    assert msgspec.json.decode(msgspec.json.encode(v), type=VersionRecord) == v
