"""``python -m myolo.coordinator.localstack.demo`` (``make demo``): an elastic training job living through a GPU failure.

It runs the real commands an operator would, and prints each before its output:

1. ``myoloctl local up --secure --nodes 3 --gpus 1 --coordinators 2``: Kafka (SASL/SCRAM over TLS, ACLs per
   role, each process its own Kafka user), two coordinators (one leads), three agents with one simulated GPU
   each, every one a real process;
2. ``myoloctl apply -f tiny-pretrain.yaml``: a tiny GPT job of 1..3 replicas, placed on the three nodes,
   real trainer workers (gloo on the CPU) with a checkpoint every 20 steps and a host-memory snapshot every
   step; ``myoloctl get jobs`` shows the steps flowing;
3. ``myolo-agent inject --gpu 0 --xid 79`` into node-2: its GPU "falls off the bus"; the leader cordons the
   node, and the job shrinks to 2 replicas and resumes from where it stopped (both measured);
4. the GPU is reset (``--clear``) and ``myoloctl uncordon node-2``: after the growth cooldown the job grows
   back to 3 replicas;
5. ``myoloctl describe job tiny-pretrain``: the generations, the decisions with their reasons, the loss.

The stack keeps running afterwards (``--down`` stops it) so it can be explored with ``myoloctl``. It lives in a
state directory of the demo's own (``demo_state.py``), whatever stack the user ran before.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from myolo.coordinator.cli import auth
from myolo.coordinator.localstack import health
from myolo.coordinator.localstack.broker import state
from myolo.coordinator.localstack.demo_state import demo_state_dir, mark, plan

NODES, GPUS, COORDINATORS = 3, 1, 2
VICTIM, VICTIM_GPU, XID = "node-2", 0, 79
JOB = "tiny-pretrain"
MANIFEST = """\
apiVersion: myolo.ai/v1
kind: ElasticJob
metadata: {name: tiny-pretrain}
spec:
  minReplicas: 1
  maxReplicas: 3
  replica: {tp: 1, pp: 1}          # one data-parallel replica = tp x pp GPUs
  trainer:
    model: {name: tiny}
    optimizer: {steps: 2000}
    data: {globalBatch: 12, seqLen: 64}
    runtime: {seed: 0}
    checkpoint: {every: 20, snapshotEvery: 1}
  checkpointDir: CHECKPOINTS
"""


def _say(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m" if sys.stdout.isatty() else f"\n== {text}", flush=True)


def _run(display: str, argv: list[str], env: dict[str, str], *, check: bool = True) -> int:
    print(f"$ {display}", flush=True)
    code = subprocess.run(argv, env=env, check=False).returncode
    if check and code != 0:
        raise SystemExit(f"demo: `{display}` failed (exit {code}); see its output above")
    return code


def _myoloctl(*args: str) -> tuple[str, list[str]]:
    return "myoloctl " + " ".join(args), [sys.executable, "-m", "myolo.coordinator.cli.main", *args]


def _get(api_urls: list[str], path: str, token: str | None) -> dict | None:
    """The body of the first coordinator answering 200 (``token``: the stack's API token)."""
    for url in api_urls:
        answer = health.get_json(f"{url}{path}", timeout=1.0, token=token)
        if answer is not None and answer[0] == 200 and isinstance(answer[1], dict):
            return answer[1]
    return None


def _wait(api_urls: list[str], path: str, ok: Callable[[dict], bool], timeout: float, token: str | None) -> dict | None:
    """The first answer that satisfies ``ok``; None if none does in time (``token``: the stack's API token)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = _get(api_urls, path, token)
        if body is not None and ok(body):
            return body
        time.sleep(0.1)
    return None


def _training(replicas: int, above: int = 0, steps: int = 3) -> Callable[[dict], bool]:
    """The job runs ``replicas`` replicas in a generation after ``above`` and trained ``steps`` steps there."""

    def ok(job: dict) -> bool:
        gen = job.get("generation") or {}
        resumed = gen.get("resumed_from")
        return (
            job.get("phase") == "Running"
            and gen.get("number", 0) > above
            and gen.get("replicas") == replicas
            and resumed is not None
            and job["progress"]["step"] >= resumed + steps
        )

    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m myolo.coordinator.localstack.demo", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="Stack state dir (default: the demo's own, $XDG_STATE_HOME/myolo/demo; MYOLO_STATE_DIR is the user's).",
    )
    parser.add_argument("--down", action="store_true", help="Stop the stack at the end.")
    parser.add_argument("--timeout", type=float, default=120.0, help="Seconds to wait for each stage.")
    args = parser.parse_args(argv)
    state_dir = (args.state_dir or demo_state_dir(os.environ)).resolve()
    env = {k: v for k, v in os.environ.items() if k not in ("MYOLO_API", "MYOLO_KAFKA_BOOTSTRAP")}
    env["MYOLO_STATE_DIR"] = str(state_dir)
    before = plan(state_dir)
    if before.action == "refuse":
        print(before.say, file=sys.stderr)
        return 2
    _say(before.say)
    if before.action == "replace":
        _run(*_myoloctl("local", "down", "--clean"), env)
    mark(state_dir)
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
    _say(
        f"Start the local stack: Kafka (secured), {COORDINATORS} coordinators, {NODES} agents with {GPUS} simulated GPU each"
    )
    _run(
        *_myoloctl(
            "local",
            "up",
            "--secure",
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
    token = auth.stack_token(state_dir)
    _run(*_myoloctl("get", "nodes"), env)

    manifest = state_dir / f"{JOB}.yaml"
    manifest.write_text(MANIFEST.replace("CHECKPOINTS", str(state_dir / "checkpoints" / JOB)))
    _say(f"Apply an elastic job: {manifest}")
    print(manifest.read_text(), end="")
    _run(*_myoloctl("apply", "-f", str(manifest)), env)
    job = _wait(api_urls, f"/v1/jobs/{JOB}", _training(3, steps=5), timeout, token)
    if job is None:
        print(
            f"demo: {JOB} did not start training on 3 replicas within {timeout:g} s; see `myoloctl describe job {JOB}`"
        )
        return 1
    _run(*_myoloctl("get", "jobs"), env)
    first = job["generation"]["number"]

    _say(f"Inject XID {XID} (GPU fallen off the bus) into GPU {VICTIM_GPU} of {VICTIM}")
    socket = records[VICTIM].info["socket"]
    injected = time.monotonic()
    _inject(env, socket, "--gpu", str(VICTIM_GPU), "--xid", str(XID))
    node = _wait(api_urls, f"/v1/nodes/{VICTIM}", lambda n: bool(n.get("cordoned")), 30.0, token)
    if node is None:
        print(f"demo: {VICTIM} was not cordoned within 30 s; see `myoloctl local status` and the coordinator logs")
        return 1
    cordon = node["cordon"]
    print(
        f"{VICTIM} cordoned {time.monotonic() - injected:.2f} s after the injection, by {cordon['by']}: {cordon['reason']}"
    )
    job = _wait(api_urls, f"/v1/jobs/{JOB}", _training(2, first, steps=1), timeout, token)
    if job is None:
        print(f"demo: {JOB} did not resume on 2 replicas within {timeout:g} s; see `myoloctl describe job {JOB}`")
        return 1
    gen = job["generation"]
    print(
        f"{JOB} generation {gen['number']}: 2 replicas on {', '.join(m['node_id'] for m in gen['members'])}, "
        f"resumed after step {gen['resumed_from']}, first step {time.monotonic() - injected:.1f} s after the injection"
    )
    _run(*_myoloctl("get", "jobs"), env)

    _say(f"Reset the GPU and uncordon {VICTIM}: the job grows back after its cooldown")
    _inject(env, socket, "--clear")
    _run(*_myoloctl("uncordon", VICTIM, "--reason", "GPU reset"), env)
    job = _wait(api_urls, f"/v1/jobs/{JOB}", _training(3, gen["number"], steps=1), timeout, token)
    if job is None:
        print(f"demo: {JOB} did not grow back to 3 replicas within {timeout:g} s; see `myoloctl describe job {JOB}`")
        return 1
    _run(*_myoloctl("get", "jobs"), env)

    _say(f"What the coordinators know about {JOB}")
    _run(*_myoloctl("describe", "job", JOB), env)
    return 0


def _inject(env: dict[str, str], socket: str, *args: str) -> None:
    _run(
        f"myolo-agent inject --socket {socket} {' '.join(args)}",
        [sys.executable, "-m", "myolo.agent", "inject", "--socket", socket, *args],
        env,
    )


if __name__ == "__main__":
    sys.exit(main())
