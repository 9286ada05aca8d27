"""Prometheus for the local stack: file-based service discovery of its agents and coordinators, a scrape token,
and a ``prometheus.yml`` that uses them with the shipped rules, all under ``<state dir>/prometheus/``.

``myoloctl local up`` writes them and writes the target files again whenever members start or stop, so a
Prometheus started with ``prometheus --config.file=<state dir>/prometheus/prometheus.yml`` follows the stack
(it re-reads the target files by itself). Each target is ``host:port`` of an agent's endpoint or a
coordinator's API; the coordinators are scraped with a token of the ``scrape`` role, which reads ``/metrics``
and nothing else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from myolo.common.files import atomic_write
from myolo.coordinator.api import tokens
from myolo.coordinator.localstack.broker import state

SCRAPE_TOKEN_NAME = "prometheus"
AGENT_JOB, COORDINATOR_JOB = "myolo-agent", "myolo-coordinator"


@dataclass(frozen=True)
class PrometheusFiles:
    folder: Path
    agents: Path  # file_sd targets of the agents
    coordinators: Path  # ... of the coordinators
    config: Path  # prometheus.yml
    rules: Path  # a copy of the shipped rules
    token: Path  # the scrape token (0600)


def files(state_dir: Path) -> PrometheusFiles:
    folder = state_dir / "prometheus"
    return PrometheusFiles(
        folder,
        folder / "agents.json",
        folder / "coordinators.json",
        folder / "prometheus.yml",
        folder / "myolo-rules.yml",
        folder / "scrape.token",
    )


def write_targets(state_dir: Path) -> PrometheusFiles:
    """The agents' and coordinators' targets as the state file records them (a stopped member stays listed
    until ``local down``: Prometheus shows it down, which is the point)."""
    f = files(state_dir)
    f.folder.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[dict[str, object]]] = {AGENT_JOB: [], COORDINATOR_JOB: []}
    for record in state.load(state_dir).processes:
        url = record.info.get("health_url") if record.role == "agent" else record.info.get("api_url")
        if record.role not in ("agent", "coordinator") or not url:
            continue
        parts = urlsplit(url)
        job = AGENT_JOB if record.role == "agent" else COORDINATOR_JOB
        groups[job].append({"targets": [parts.netloc], "labels": {"__scheme__": parts.scheme or "http"}})
    for path, job in ((f.agents, AGENT_JOB), (f.coordinators, COORDINATOR_JOB)):
        atomic_write(path, json.dumps(groups[job], indent=2).encode(), durable=False)
    return f


def write_config(state_dir: Path, *, interval_s: float = 15.0, ca_file: str | None = None) -> PrometheusFiles:
    """The targets, a scrape token in the stack's tokens file, the rules and a prometheus.yml using them."""
    f = write_targets(state_dir)
    tokens_file = tokens.local_paths(state_dir)[0]
    tokens.ensure_token(tokens_file, f.token, SCRAPE_TOKEN_NAME, "scrape")
    rules = resources.files("myolo.common.metrics").joinpath("prometheus/myolo-rules.yml").read_bytes()
    atomic_write(f.rules, rules, durable=False)
    every = f"{interval_s:g}s"
    coordinator_job: dict[str, object] = {
        "job_name": COORDINATOR_JOB,
        "authorization": {"credentials_file": str(f.token)},
        "file_sd_configs": [{"files": [str(f.coordinators)], "refresh_interval": "5s"}],
    }
    if ca_file:
        coordinator_job["tls_config"] = {"ca_file": ca_file}
    doc = {
        "global": {"scrape_interval": every, "evaluation_interval": every},
        "rule_files": [str(f.rules)],
        "scrape_configs": [
            {"job_name": AGENT_JOB, "file_sd_configs": [{"files": [str(f.agents)], "refresh_interval": "5s"}]},
            coordinator_job,
        ],
    }
    header = b"# written by `myoloctl local up` for this stack; see docs/metrics.md\n"
    atomic_write(f.config, header + yaml.safe_dump(doc, sort_keys=False).encode(), durable=False)
    return f
