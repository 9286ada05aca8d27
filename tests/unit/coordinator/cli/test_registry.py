"""`myoloctl registry ...` against a leading coordinator's real API on a real port (no broker: its writes are
recorded), run in a thread while the test's event loop serves it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from myolo.coordinator.cli.main import app
from myolo.coordinator.registry.component import Registry
from myolo.coordinator.registry.interface import NewVersion
from myolo.coordinator.registry.records import CHAMPION
from myolo.events.payloads import ModelExport
from myolo.events.payloads.models import Quantization
from tests.support.api_auth import ADMIN, OPERATOR
from tests.support.coordinator.registry import TEMPLATE, Leading, evaluated, sha
from tests.support.coordinator.served import myoloctl, serve


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Leading, str]]:
    lead = await Leading(tmp_path).lead()
    async with serve(lead.coord) as url:
        yield lead, url


def registry(lead: Leading) -> Registry:
    return lead.registry


async def test_register_a_local_file_computes_its_sha256_and_reads_metrics(served, tmp_path: Path) -> None:
    lead, url = served
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"weights" * 1000)
    done = await myoloctl(
        url,
        "registry",
        "register",
        "credit-risk",
        "--artifact",
        str(weights),
        "--metrics",
        "loss=2.3,perplexity=9.9",
        "--tag",
        "team=risk",
        "--description",
        "baseline",
    )
    assert done.exit_code == 0, done.output
    assert "model/credit-risk version 1 (challenger) registered via" in done.output
    v = registry(lead).version("credit-risk", 1)
    assert v is not None
    assert (v.sha256, v.size_bytes, v.artifact) == (
        hashlib.sha256(weights.read_bytes()).hexdigest(),
        7000,
        str(weights),
    )
    assert (v.metrics, v.tags, v.description, v.by) == (
        {"loss": 2.3, "perplexity": 9.9},
        {"team": "risk"},
        "baseline",
        f"operator:{OPERATOR}",
    )
    again = await myoloctl(url, "registry", "register", "credit-risk", "--artifact", str(weights))
    assert again.exit_code == 0 and "version 1 (challenger) was registered already" in again.output


async def test_register_reads_the_trainers_export_as_metrics(served, tmp_path: Path) -> None:
    lead, url = served
    export = ModelExport(
        artifact="s3://m/a.safetensors",
        sha256=sha("a"),
        size_bytes=10,
        model="tiny",
        steps=400,
        data_sha256=sha("data"),
        eval=evaluated(1.7),
    )
    path = tmp_path / "a.safetensors.json"
    path.write_bytes(msgspec.json.encode(export))
    done = await myoloctl(
        url,
        "registry",
        "register",
        "m",
        "--artifact",
        "s3://m/a.safetensors",
        "--sha256",
        sha("a"),
        "--metrics",
        str(path),
    )
    assert done.exit_code == 0, done.output
    v = registry(lead).version("m", 1)
    assert (v.steps, v.data_sha256, v.size_bytes, v.metrics["loss"]) == (400, sha("data"), 10, 1.7)
    assert v.model_index[0].results[0].dataset.revision == evaluated(1.7).dataset_sha256


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--artifact", "s3://m/a"), "--sha256: required for a URL"),
        (("--artifact", "/nope/model.safetensors"), "--artifact /nope/model.safetensors: cannot read it"),
        (("--artifact", "s3://m/a", "--sha256", sha("a"), "--metrics", "loss"), "--metrics: 'loss' is not name=number"),
        (("--artifact", "s3://m/a", "--sha256", sha("a"), "--tag", "x"), "--tag: 'x' is not key=value"),
        (("--artifact", "s3://m/a", "--sha256", "XYZ"), "sha256"),
        (("--artifact", "s3://m/a", "--sha256", sha("a"), "--parent", "4"), "parent: model m has no version 4"),
    ],
)
async def test_a_bad_registration_exits_2_naming_the_option_or_field(served, args: tuple[str, ...], words: str) -> None:
    lead, url = served
    result = await myoloctl(url, "registry", "register", "m", *args)
    assert result.exit_code == 2, result.output
    assert words in result.output
    assert registry(lead).versions("m") == ()


async def test_models_versions_and_show_as_tables_and_json(served) -> None:
    lead, url = served
    reg = registry(lead)
    await reg.register("m", NewVersion(artifact="/a", sha256=sha("a"), eval=evaluated(2.0)), "auto")
    await reg.register(
        "m",
        NewVersion(
            artifact="/b",
            sha256=sha("b"),
            eval=evaluated(1.5),
            parent=1,
            job="m-retrain-1",
            generation=2,
            drift_event="d-7",
        ),
        "auto",
    )
    await reg.set_alias("m", CHAMPION, 1, "operator:olive", "first")
    models = await myoloctl(url, "registry", "models")
    assert models.exit_code == 0, models.output
    lines = models.output.splitlines()
    assert lines[0].split() == [
        "MODEL",
        "LATEST",
        "CHAMPION",
        "CHALLENGER",
        "OTHER",
        "ALIASES",
        "RETRAIN",
        "PROMOTION",
        "UPDATED",
    ]
    assert lines[1].split()[:7] == ["m", "v2", "v1", "v2", "-", "no", "manual"]
    versions = await myoloctl(url, "registry", "versions", "m")
    assert versions.exit_code == 0, versions.output
    rows = [line.split() for line in versions.output.splitlines()[1:]]
    assert [r[:5] for r in rows] == [
        ["v2", "challenger", "job", "m-retrain-1/2", "-"],
        ["v1", "champion", "external", "-", "-"],
    ]
    shown = await myoloctl(url, "registry", "show", "m", "2")
    assert shown.exit_code == 0, shown.output
    out = shown.output
    assert "Evaluation (model-index):" in out and "text-generation" in out and "1.5000" in out
    assert "Lineage (this version first, to the root):" in out
    lineage = out[out.index("Lineage") :].splitlines()[2:]
    assert [line.split()[:5] for line in lineage] == [
        ["v2", "v1", "job", "m-retrain-1/2", "d-7"],
        ["v1", "-", "external", "-", "-"],
    ]
    as_json = await myoloctl(url, "registry", "show", "m", "2", "-o", "json")
    body = json.loads(as_json.output)
    assert body["version"] == 2 and [e["version"] for e in body["lineage"]] == [2, 1]
    missing = await myoloctl(url, "registry", "show", "m", "9")
    assert missing.exit_code == 2 and "model m has no version 9" in missing.output


async def test_show_prints_a_quantized_versions_grid_and_both_evaluations(served) -> None:
    lead, url = served
    reg = registry(lead)
    await reg.register("m", NewVersion(artifact="/a", sha256=sha("a"), eval=evaluated(2.0)), "auto")
    q = Quantization(
        scheme="gptq", bits=4, group_size=64, layers=28, bits_per_weight=4.5, calib_sha256=sha("calib"),
        calib_tokens=32768, source_sha256=sha("a"), source_eval=evaluated(2.0),
    )  # fmt: skip
    await reg.register(
        "m", NewVersion(artifact="/a-int4", sha256=sha("q"), eval=evaluated(2.02), parent=1, quantization=q), "auto"
    )
    shown = await myoloctl(url, "registry", "show", "m", "2")
    assert shown.exit_code == 0, shown.output
    out = " ".join(shown.output.split())
    assert "Quantized: gptq, 4 bits, groups of 64: 28 layers, 4.50 bits/weight" in out
    assert f"from: v1 (sha256 {sha('a')[:12]})" in out and "calibration: 32,768 tokens" in out
    assert "held-out: perplexity 7.5383 against the parent's 7.3891 (+2.02%) on 4,096 tokens" in out
    assert (
        json.loads((await myoloctl(url, "registry", "show", "m", "2", "-o", "json")).output)["quantization"]["bits"]
        == 4
    )


async def test_model_set_quantize_margin_needs_an_admin_and_shows_in_the_promotion(served) -> None:
    lead, url = served
    await registry(lead).put_model("m", "", None, None, "operator:ada")
    refused = await myoloctl(url, "registry", "model", "set", "m", "--quantize-margin", "0.03", who=OPERATOR)
    assert refused.exit_code != 0 and "changing quantize_margin needs the admin role" in refused.output
    done = await myoloctl(url, "registry", "model", "set", "m", "--quantize-margin", "0.03", who=ADMIN)
    assert done.exit_code == 0, done.output
    assert "promotion manual, quantized within 3.0%" in done.output
    assert registry(lead).model("m").quantize_margin == 0.03
    bad = await myoloctl(url, "registry", "model", "set", "m", "--quantize-margin", "2", who=ADMIN)
    assert bad.exit_code == 2 and "--quantize-margin: 2.0 is not a fraction in [0, 1)" in bad.output


async def test_alias_set_rm_and_history(served) -> None:
    lead, url = served
    reg = registry(lead)
    for name in ("a", "b"):
        await reg.register("m", NewVersion(artifact=f"/{name}", sha256=sha(name)), "auto")
    first = await myoloctl(url, "registry", "alias", "set", "m", "champion", "1", "--reason", "passed the shadow test")
    assert first.exit_code == 0, first.output
    assert f"model/m@champion -> v1 via {url}" in first.output
    await lead.clock.advance(60)
    second = await myoloctl(url, "registry", "alias", "set", "m", "champion", "2", "--reason", "4% better")
    assert "model/m@champion -> v2 (was v1)" in second.output
    no_reason = await myoloctl(url, "registry", "alias", "set", "m", "champion", "1")
    assert no_reason.exit_code == 2 and "--reason" in no_reason.output
    history = await myoloctl(url, "registry", "alias", "history", "m", "champion")
    assert history.exit_code == 0, history.output
    lines = history.output.splitlines()
    assert lines[0] == "m@champion -> v2"
    assert lines[1].split() == ["WHEN", "VERSION", "PREVIOUS", "BY", "REASON"]
    assert [line.split()[2:] for line in lines[2:]] == [
        ["v2", "v1", f"operator:{OPERATOR}", "4%", "better"],
        ["v1", "-", f"operator:{OPERATOR}", "passed", "the", "shadow", "test"],
    ]
    when = reg.alias("m", CHAMPION).history[0].when
    at = await myoloctl(url, "registry", "alias", "history", "m", "champion", "--at", str(when))
    assert "it pointed at v1" in at.output
    gone = await myoloctl(url, "registry", "alias", "rm", "m", "champion", "--reason", "pulled")
    assert gone.exit_code == 0 and "model/m@champion removed" in gone.output
    assert reg.alias("m", CHAMPION).version is None
    listed = await myoloctl(url, "registry", "alias", "list", "m")
    assert [line.split()[:2] for line in listed.output.splitlines()[1:]] == [
        ["challenger", "v2"],
        ["champion", "removed"],
    ]


async def test_model_set_checks_the_template_here_and_needs_an_admin_for_it(served, tmp_path: Path) -> None:
    lead, url = served
    job = tmp_path / "retrain.yaml"
    job.write_text(TEMPLATE.replace("{labels: {team: risk}}", "{name: fixed}"))
    named = await myoloctl(
        url, "registry", "model", "set", "m", "--retrain", str(job), "--artifact-dir", "/srv/a", who=ADMIN
    )
    assert (
        named.exit_code == 2 and "metadata.name must not be set" in named.output and "nothing was sent" in named.output
    )
    assert registry(lead).model("m") is None
    job.write_text(TEMPLATE)
    no_dir = await myoloctl(url, "registry", "model", "set", "m", "--retrain", str(job), who=ADMIN)
    assert no_dir.exit_code == 2 and "--artifact-dir: required" in no_dir.output
    as_operator = await myoloctl(
        url, "registry", "model", "set", "m", "--retrain", str(job), "--artifact-dir", "/srv/a"
    )
    assert as_operator.exit_code == 1 and "needs the admin role" in as_operator.output
    done = await myoloctl(
        url,
        "registry",
        "model",
        "set",
        "m",
        "--description",
        "credit risk",
        "--retrain",
        str(job),
        "--artifact-dir",
        "/srv/a",
        "--from-scratch",
        "--cooldown",
        "30m",
        "--promote-margin",
        "0.02",
        who=ADMIN,
    )
    assert done.exit_code == 0, done.output
    assert "model/m created" in done.output and "retraining on, promotion auto >= 2.0%" in done.output
    model = registry(lead).model("m")
    assert model.retrain is not None and (model.retrain.from_champion, model.retrain.cooldown_s) == (False, 1800.0)
    described = await myoloctl(url, "registry", "model", "set", "m", "--description", "credit risk v2")
    assert described.exit_code == 0, described.output  # an operator: the template and margin go back unchanged
    assert (
        registry(lead).model("m").description == "credit risk v2" and registry(lead).model("m").retrain == model.retrain
    )
    shown = await myoloctl(url, "registry", "model", "show", "m")
    assert "Retraining: from scratch, exports to /srv/a/<job>/, cooldown 1800 s" in shown.output
    assert "kind: ElasticJob" in shown.output
    manual = await myoloctl(url, "registry", "model", "set", "m", "--manual-promotion", "--no-retrain", who=ADMIN)
    assert manual.exit_code == 0 and "retraining off, promotion manual" in manual.output
    bad = await myoloctl(url, "registry", "model", "set", "m", "--promote-margin", "1.5", who=ADMIN)
    assert bad.exit_code == 2 and "--promote-margin: 1.5 is not a fraction" in bad.output
    orphan = await myoloctl(url, "registry", "model", "set", "m", "--cooldown", "1h", who=ADMIN)
    assert orphan.exit_code == 2 and "--cooldown: the model has no retraining template" in orphan.output


def test_every_registry_command_has_help() -> None:
    runner = CliRunner()
    for command in (
        ["models"],
        ["versions"],
        ["show"],
        ["register"],
        ["alias", "set"],
        ["alias", "rm"],
        ["alias", "history"],
        ["alias", "list"],
        ["model", "set"],
        ["model", "show"],
    ):
        result = runner.invoke(app, ["registry", *command, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (command, result.output)
        assert "Usage:" in result.output and len(result.output.splitlines()) > 5
