"""What ``myoloctl local up`` writes for Prometheus, checked by Debian's promtool: the targets of the stack's
members as the state file records them, a scrape token of the scrape role, and a config promtool accepts."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import yaml

from myolo.coordinator.api import tokens
from myolo.coordinator.localstack import prometheus as local_prometheus
from myolo.coordinator.localstack.broker import state
from tests.support.prometheus import binary


def _stack(state_dir: Path) -> None:
    tokens.ensure_local(state_dir)  # the stack's tokens file, with its admin token
    records = [
        state.ProcessRecord("coordinator-1", "coordinator", 11, "m", "l", info={"api_url": "http://127.0.0.1:8470"}),
        state.ProcessRecord("node-1", "agent", 12, "m", "l", info={"health_url": "http://127.0.0.1:9101"}),
        state.ProcessRecord("node-2", "agent", 13, "m", "l", info={"health_url": "http://127.0.0.1:9102"}),
        state.ProcessRecord("kafka", "kafka", 14, "m", "l"),
    ]
    state.save(state_dir, state.StackState(bootstrap="127.0.0.1:9092", processes=records))


def test_local_up_writes_targets_a_scrape_token_and_a_config_promtool_accepts(tmp_path: Path) -> None:
    _stack(tmp_path)
    files = local_prometheus.write_config(tmp_path, interval_s=5)
    agents = json.loads(files.agents.read_text())
    assert [g["targets"] for g in agents] == [["127.0.0.1:9101"], ["127.0.0.1:9102"]]
    assert json.loads(files.coordinators.read_text())[0]["targets"] == ["127.0.0.1:8470"]
    assert stat.S_IMODE(files.token.stat().st_mode) == 0o600
    entry = next(e for e in tokens.load(tokens.local_paths(tmp_path)[0]) if e.name == "prometheus")
    assert entry.role == "scrape" and entry.digest == tokens.digest(files.token.read_text().strip())
    doc = yaml.safe_load(files.config.read_text())
    assert doc["global"]["scrape_interval"] == "5s"
    done = subprocess.run([binary("promtool"), "check", "config", str(files.config)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 1 rule files found" in done.stdout

    # written again: the same token (it still matches); a member gone leaves the targets
    token = files.token.read_text()
    st = state.load(tmp_path)
    st.drop("node-2")
    state.save(tmp_path, st)
    again = local_prometheus.write_config(tmp_path)
    assert again.token.read_text() == token
    assert [g["targets"] for g in json.loads(again.agents.read_text())] == [["127.0.0.1:9101"]]
    # a token file that no longer matches (lost, edited) is replaced, with its entry
    files.token.write_text("myolo_stale\n")
    local_prometheus.write_config(tmp_path)
    assert files.token.read_text() != "myolo_stale\n"
    assert [e.name for e in tokens.load(tokens.local_paths(tmp_path)[0])].count("prometheus") == 1
