"""The seed's chaos experiment: an upgrade and a training job while the links to the broker are wrecked.

The local stack (one coordinator, three agents under their launchers, a job training on all three) reaches
Kafka only through Toxiproxy. For ``MYOLO_CHAOS_S`` seconds (45 in ``make test``, two stalls and two resets;
300 in ``make chaos``), while a good agent release rolls out, most connections get what 80 % packet loss does
to TCP: the lost segments are retransmitted after a timeout that doubles each time, so the bytes arrive late
and in bursts, the throughput collapses, some connections stall for seconds and some are cut. The toxics (``TOXICS``, on
80 % of the connections unless said): latency 400 ms with 300 ms jitter each way; bandwidth 48 KB/s each way;
every 20 s a stall of 5 s on half of them (``timeout`` 0: no byte passes) and a reset of a third of them
(``reset_peer``).

Checked once the toxics are gone and everything has carried on: no sample lost (every agent run's ``seq``
without a gap in Kafka), no node cordoned as Lost (their agents kept running), no command executed twice (one
``accepted`` ack per command id), the rollout ended and every node runs the version its record names, and the
job kept its checkpoints and trains on. The figures are printed (the issue note and docs/rollouts.md).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

import myolo
from myolo.coordinator.localstack.broker import LocalBroker
from myolo.events.settings import KafkaSettings
from myolo.kernels.checkpoint.marker import read_marker
from myolo.kernels.checkpoint.retention import is_complete
from tests.support import evidence
from tests.support.coordinator import local
from tests.support.helpers import free_port, poll_until
from tests.support.toxiproxy import Toxic, Toxiproxy
from tests.support.wheel import build_project_wheel

CHAOS_S = float(os.environ.get("MYOLO_CHAOS_S", "45"))
NEW = "4.0.2.dev0"
PROXY = "kafka"
TOXICS = [
    Toxic("latency-down", "latency", "downstream", 0.8, {"latency": 400, "jitter": 300}),
    Toxic("latency-up", "latency", "upstream", 0.8, {"latency": 400, "jitter": 300}),
    Toxic("bandwidth-down", "bandwidth", "downstream", 0.8, {"rate": 48}),
    Toxic("bandwidth-up", "bandwidth", "upstream", 0.8, {"rate": 48}),
]
STALL = Toxic("stall", "timeout", "downstream", 0.5, {"timeout": 0})
RESET = Toxic("reset", "reset_peer", "downstream", 0.33, {"timeout": 0})


class Chaos(threading.Thread):
    """The toxics for ``seconds``, with a stall and a reset every 20 s; then every toxic is removed."""

    def __init__(self, toxi: Toxiproxy, seconds: float) -> None:
        super().__init__(daemon=True)
        self.toxi, self.seconds = toxi, seconds
        self.stalls = self.resets = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for toxic in TOXICS:
                self.toxi.add(PROXY, toxic)
            end = time.monotonic() + self.seconds
            while time.monotonic() + 20 < end:
                time.sleep(10)
                self.toxi.add(PROXY, STALL)
                self.stalls += 1
                time.sleep(5)
                self.toxi.remove(PROXY, STALL.name)
                self.toxi.add(PROXY, RESET)
                self.resets += 1
                time.sleep(0.5)
                self.toxi.remove(PROXY, RESET.name)
                time.sleep(4.5)
            time.sleep(max(0.0, end - time.monotonic()))
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.toxi.clear(PROXY)


def chaos_broker(tmp_path: Path, proxy_port: int) -> LocalBroker:
    """A broker with a second listener, CHAOS, whose advertised address is the proxy's: the members bootstrap
    through the proxy and every connection they open after it goes through it too. The tests' own reads use
    the plain listener."""
    plain, chaos, controller = free_port(), free_port(), free_port()
    props = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},CHAOS://127.0.0.1:{chaos},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},CHAOS://127.0.0.1:{proxy_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CHAOS:PLAINTEXT,CONTROLLER:PLAINTEXT",
    }
    broker = LocalBroker(tmp_path, port=plain, controller_port=controller, properties=props, tied_to_parent=True)
    broker.chaos_port = chaos  # type: ignore[attr-defined]
    return broker


@pytest.mark.kafka
@pytest.mark.timeout(CHAOS_S + 1200)
def test_an_upgrade_and_a_job_under_a_wrecked_network_lose_nothing(tmp_path: Path, local_myoloctl) -> None:
    myoloctl = local_myoloctl
    wheel = build_project_wheel(tmp_path / "build", NEW)
    base = myolo.__version__
    proxy_port = free_port()
    broker = chaos_broker(tmp_path, proxy_port)
    toxi = Toxiproxy(tmp_path / "toxiproxy.log")
    try:
        # the proxy listens first: a port picked free and bound later could be taken (an outgoing connection's)
        toxi.proxy(PROXY, proxy_port, f"127.0.0.1:{broker.chaos_port}")  # type: ignore[attr-defined]
        broker.start(timeout=120)
        local.start_members(tmp_path, coordinators=1, bootstrap=f"127.0.0.1:{proxy_port}")
        ckpt = tmp_path / "ckpt"
        (tmp_path / "steady.yaml").write_text(local.steady_job("steady", ckpt))
        applied = poll_until(
            "a leader to take the job",
            lambda: myoloctl("apply", "-f", str(tmp_path / "steady.yaml")).exit_code == 0,
            60,
        )
        assert applied

        def job() -> dict:
            return json.loads(myoloctl("get", "job", "steady", "-o", "json").output)

        def step() -> int:
            return int(((job().get("progress") or {}).get("step")) or 0)

        def nodes() -> dict[str, dict]:
            return {n["node_id"]: n for n in json.loads(myoloctl("get", "nodes", "-o", "json").output)["items"]}

        def rollout() -> dict:
            return json.loads(myoloctl("rollout", "status", "-o", "json").output)

        # steady on 3 replicas for a while: the rollout's throughput baseline is the last baseline_s of training
        poll_until(
            "the job steady on 3 replicas",
            lambda: (job().get("generation") or {}).get("replicas") == 3 and step() > 40,
            300,
        )
        start = myoloctl(
            "rollout", "start", "--component", "agent", "--version", NEW, "--artifact", str(wheel),
            "--bake", "20s", "--throughput-tolerance", "0.9",
        )  # fmt: skip
        assert start.exit_code == 0, start.output
        began, step_before = time.monotonic(), step()
        chaos = Chaos(toxi, CHAOS_S)
        chaos.start()
        lost_seen: set[str] = set()
        silent = 0.0  # the longest a node went unheard by the coordinator, while the toxics were on
        while chaos.is_alive():
            try:
                for n, node in nodes().items():
                    if node["liveness"] == "Lost" or ((node.get("cordon") or {}).get("by") == "auto:lost"):
                        lost_seen.add(n)
                    silent = max(silent, node.get("last_seen_age_s") or 0.0)
            except (ValueError, KeyError):
                pass  # the API answered, but slowly or partly: the next poll
            time.sleep(2)
        chaos.join()
        assert chaos.error is None, chaos.error
        after_chaos = time.monotonic()
        rec = poll_until(
            "the rollout to end", lambda: (r := rollout())["phase"] in ("Succeeded", "RolledBack") and r, 600
        )
        ended = time.monotonic()
        step_after = poll_until("the job to train on", lambda: (s := step()) > step_before + 20 and s, 300)

        # every node runs the version its rollout record names
        want = NEW if rec["phase"] == "Succeeded" else base

        def on_named_version() -> dict | None:
            ns = nodes()
            return ns if all(n["agent_version"] == want and not n["agent_on_trial"] for n in ns.values()) else None

        found = poll_until("every node on the version the record names", on_named_version, 180)
        assert not [n for n, node in found.items() if (node.get("cordon") or {}).get("cordoned")], found
        assert not lost_seen, f"cordoned or judged Lost while their agents ran: {sorted(lost_seen)}"

        # nothing lost, nothing run twice: read what reached Kafka (through the plain listener)
        poll_until("the agents' spools sent", lambda: all(_spool_empty(n["health_url"]) for n in nodes().values()), 120)
        direct = KafkaSettings(bootstrap=broker.bootstrap)
        seen = evidence.samples(direct)
        commands, twice = evidence.commands_run_twice(direct)
        assert seen.lost == 0, f"{seen.lost} sample(s) lost of {seen.total}"
        assert not twice, f"commands executed more than once: {twice}"
        # the job's newest checkpoint on disk (a save, or a persisted snapshot) is there, whole, and past the
        # step it had reached when the toxics began
        marker = read_marker(ckpt)
        assert marker is not None and is_complete(ckpt / marker.path, marker.world_size), marker
        assert marker.step >= step_before, (marker, step_before)
        checkpoints = sorted(p.name for p in ckpt.iterdir() if p.is_dir())
        print(
            f"\nchaos {CHAOS_S:.0f} s ({chaos.stalls} stalls of 5 s, {chaos.resets} resets): rollout {rec['phase']}"
            f"{' (' + rec['failed_gate']['gate'] + ': ' + rec['failed_gate']['detail'][:300] + ')' if rec.get('failed_gate') else ''} "
            f"{ended - began:.0f} s after its start ({ended - after_chaos:.0f} s after the toxics went); "
            f"samples in Kafka {seen.total} over {seen.runs} agent runs, lost {seen.lost}, duplicates "
            f"{seen.duplicates}; commands {commands}, run twice {len(twice)}; job step {step_before} -> {step_after}; "
            f"checkpoints on disk {checkpoints} (newest {marker.path}); nodes judged Lost {sorted(lost_seen)}; the longest a node went "
            f"unheard during the toxics {silent:.1f} s"
        )
    finally:
        toxi.stop()
        local.stop_all(tmp_path, broker)


def _spool_empty(health_url: str | None) -> bool:
    """The agent's health report (at the URL its newest sample gives) says its spool holds nothing unsent."""
    import urllib.request

    if not health_url:
        return False
    try:
        with urllib.request.urlopen(f"{health_url}/healthz", timeout=5) as resp:
            report = json.load(resp)
    except (OSError, ValueError):
        return False
    return (report.get("checks", {}).get("spool", {}).get("data") or {}).get("pending", 1) == 0
