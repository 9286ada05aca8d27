"""``python -m coordinator.demo`` (``make demo``): a fault injected into a running local fleet, and the reaction.

It runs the real commands an operator would, and prints each before its output:

1. ``myoloctl local up --nodes 3 --gpus 4 --coordinators 2``: Kafka, two coordinators (one leads), three
   agents with four simulated GPUs each, every one a real process;
2. ``myoloctl get nodes``: three Ready, healthy nodes;
3. ``myolo-agent inject --gpu 3 --xid 79`` into node-2: GPU 3 "falls off the bus";
4. the leader cordons node-2 on its own (the time from the injection to the cordon is measured);
5. ``myoloctl get nodes`` and ``myoloctl describe node node-2`` after, and the fault events on the bus.

The stack keeps running afterwards (``--down`` stops it) so it can be explored with ``myoloctl``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from events.broker import state
from events.broker.state import default_state_dir

NODES, GPUS, COORDINATORS = 3, 4, 2
VICTIM, VICTIM_GPU, XID = "node-2", 3, 79


def _say(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m" if sys.stdout.isatty() else f"\n== {text}", flush=True)


def _run(display: str, argv: list[str], env: dict[str, str], *, check: bool = True) -> int:
    print(f"$ {display}", flush=True)
    code = subprocess.run(argv, env=env, check=False).returncode
    if check and code != 0:
        raise SystemExit(f"demo: `{display}` failed (exit {code}); see its output above")
    return code


def _myoloctl(*args: str) -> tuple[str, list[str]]:
    return "myoloctl " + " ".join(args), [sys.executable, "-m", "coordinator.cli.main", *args]


def _cordoned_within(api_urls: list[str], node: str, timeout: float) -> dict | None:
    """The node as the coordinators see it once it is cordoned; None if that does not happen in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for url in api_urls:
            try:
                with urllib.request.urlopen(f"{url}/v1/nodes/{node}", timeout=1.0) as resp:
                    body = json.load(resp)
            except OSError:
                continue
            if body.get("cordoned"):
                return body
        time.sleep(0.05)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coordinator.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--state-dir", type=Path, help="Stack state dir (default: MYOLO_STATE_DIR or ~/.local/state/myolo/local)."
    )
    parser.add_argument("--down", action="store_true", help="Stop the stack at the end.")
    parser.add_argument("--timeout", type=float, default=120.0, help="Seconds to wait for each stage.")
    args = parser.parse_args(argv)
    state_dir = (args.state_dir or default_state_dir()).resolve()
    env = {k: v for k, v in os.environ.items() if k not in ("MYOLO_API", "MYOLO_KAFKA_BOOTSTRAP")}
    env["MYOLO_STATE_DIR"] = str(state_dir)
    try:
        code = _play(state_dir, env, args.timeout)
    finally:
        if args.down:
            _say("Stop the stack")
            _run(*_myoloctl("local", "down"), env)
    if not args.down:
        _say("The stack keeps running")
        print(f"explore it:  export MYOLO_STATE_DIR={state_dir}")
        print("             myoloctl get nodes --watch ; myoloctl get gpus ; myoloctl local status")
        print(f"             myoloctl uncordon {VICTIM} --reason 'GPU replaced'")
        print("stop it:     myoloctl local down   (add --clean to delete its data and logs)")
    return code


def _play(state_dir: Path, env: dict[str, str], timeout: float) -> int:
    _say(f"Start the local stack: Kafka, {COORDINATORS} coordinators, {NODES} agents with {GPUS} simulated GPUs")
    _run(
        *_myoloctl(
            "local",
            "up",
            "--nodes",
            str(NODES),
            "--gpus",
            str(GPUS),
            "--coordinators",
            str(COORDINATORS),
            "--timeout",
            f"{timeout:g}",
        ),
        env,
    )
    stack = state.load(state_dir)
    records = {p.name: p for p in stack.processes}
    api_urls = [p.info["api_url"] for p in records.values() if p.role == "coordinator"]

    _say("The fleet before")
    _run(*_myoloctl("get", "nodes"), env)

    _say(f"Inject XID {XID} (GPU fallen off the bus) into GPU {VICTIM_GPU} of {VICTIM}")
    socket = records[VICTIM].info["socket"]
    injected = time.monotonic()
    _run(
        f"myolo-agent inject --socket {socket} --gpu {VICTIM_GPU} --xid {XID}",
        [sys.executable, "-m", "agent", "inject", "--socket", socket, "--gpu", str(VICTIM_GPU), "--xid", str(XID)],
        env,
    )
    node = _cordoned_within(api_urls, VICTIM, timeout=30.0)
    if node is None:
        print(f"demo: {VICTIM} was not cordoned within 30 s; see `myoloctl local status` and the coordinator logs")
        return 1
    cordon = node["cordon"]
    print(
        f"{VICTIM} cordoned {time.monotonic() - injected:.2f} s after the injection, "
        f"by {cordon['by']} (epoch {cordon['epoch']}): {cordon['reason']}"
    )

    _say("The fleet after")
    _run(*_myoloctl("get", "nodes"), env)
    _say(f"What the coordinators know about {VICTIM}")
    _run(*_myoloctl("describe", "node", VICTIM), env)
    _say("The fault events on the bus")
    _run(
        *_myoloctl(
            "events",
            "tail",
            "myolo.node.faults",
            "--from-beginning",
            "--idle-timeout",
            "2",
            "--bootstrap",
            stack.bootstrap or "",
        ),
        env,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
