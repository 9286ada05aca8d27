"""``myolo-coordinator components``: every component of the daemon, in build order, with what it consumes,
owns, needs, provides and serves, read from the declarations (no config, no broker)."""

from __future__ import annotations

import msgspec
from typer.testing import CliRunner

from myolo.coordinator.cli_daemon import app
from myolo.coordinator.components import COMPONENTS


def test_the_text_lists_each_component_with_its_declarations() -> None:
    result = CliRunner().invoke(app, ["components"])
    assert result.exit_code == 0, result.output
    blocks = result.output.strip().split("\n")
    names = [line for line in blocks if not line.startswith(" ")]
    assert names == [c.name for c in COMPONENTS]
    jobs = blocks[blocks.index("jobs") : blocks.index("jobs") + 6]
    assert jobs[1].split(None, 1) == [
        "consumes",
        "ai.myolo.training.progress.v1, ai.myolo.training.fault.v1, ai.myolo.training.completed.v1",
    ]
    assert jobs[2].startswith("  owns      myolo.state.jobs (") and jobs[2].endswith("kinds: job)")
    assert jobs[3] == "  needs     FleetNodes (from fleet), CommandSender (from commands), AutoCordons (from cordons)"
    assert jobs[4] == "  provides  JobsAPI"
    assert "POST /v1/jobs/{name}/scale" in jobs[5]
    preflight = blocks[blocks.index("preflight") : blocks.index("preflight") + 6]
    assert preflight[1] == "  consumes  -" and preflight[2] == "  owns      -"


def test_json_gives_the_same_declarations_typed() -> None:
    result = CliRunner().invoke(app, ["components", "--json"])
    assert result.exit_code == 0, result.output
    infos = {i["name"]: i for i in msgspec.json.decode(result.output)}
    assert list(infos) == [c.name for c in COMPONENTS]
    assert infos["commands"]["owns"][0]["topic"] == "myolo.state.commands"
    assert infos["commands"]["owns"][0]["kinds"] == ["command"]
    assert infos["drift"]["needs"] == [
        {"interface": "ModelRegistry", "provider": "registry"},
        {"interface": "JobsAPI", "provider": "jobs"},
    ]
    assert "GET /v1/nodes" in infos["fleet"]["serves"] and infos["fleet"]["owns"] == []
    assert infos["fleet"]["provides"] == ["FleetNodes"] and infos["nodes"]["provides"] == []
