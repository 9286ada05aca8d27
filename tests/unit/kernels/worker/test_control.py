"""Control requests reach every rank at the same step: two real gloo processes and a fake agent.

Only rank 0 is connected to the agent's control socket; if the other rank acted on a "stop" one step
later (or never), the ranks would wait on each other in a collective forever.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import zmq

from myolo.kernels.parallel import rendezvous
from myolo.kernels.worker.protocol import ControlMessage, WorkerHeartbeat
from tests.support.kernels.ranks import rank_env

REPO = Path(__file__).resolve().parents[4]

WORKER = r"""
import json, sys, torch
import torch.distributed as dist
torch.set_num_threads(1)
from myolo.kernels.worker import AgentLink, WorkerEnv
env = WorkerEnv.from_environ()
dist.init_process_group("gloo", rank=env.rank, world_size=env.world_size)
link = AgentLink(env)
seen = []
for step in range(1, 5001):
    link.heartbeat(step, force=True)
    req = link.poll_control(timeout_ms=20 if env.rank == 0 else 0)
    if req is not None:
        seen.append({"step": step, "checkpoint": req.checkpoint, "stop": req.stop})
        if req.stop:
            break
link.close()
dist.destroy_process_group()
print(json.dumps(seen))
"""


def test_stop_and_checkpoint_are_obeyed_by_all_ranks_at_the_same_step(tmp_path: Path) -> None:
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    pull.setsockopt(zmq.RCVTIMEO, 60_000)
    for s in (pull, push):
        s.setsockopt(zmq.LINGER, 0)
    pull.bind(f"ipc://{tmp_path}/progress.sock")
    push.bind(f"ipc://{tmp_path}/control.sock")
    store = rendezvous.host_store()
    procs = []
    for rank in range(2):
        env = rank_env(
            store,
            rank,
            2,
            MYOLO_JOB_ID="job-c",
            MYOLO_GENERATION="4",
            MYOLO_ZMQ_PROGRESS=f"ipc://{tmp_path}/progress.sock",
            MYOLO_ZMQ_CONTROL=f"ipc://{tmp_path}/control.sock",
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    try:
        sent: dict[str, int] = {}
        while "stop" not in sent:
            _, body = pull.recv_multipart()
            beat = msgspec.json.decode(body, type=WorkerHeartbeat)
            assert (beat.job_id, beat.generation) == ("job-c", 4)
            if beat.rank != 0:
                continue
            kind = "checkpoint" if "checkpoint" not in sent and beat.step >= 3 else None
            if kind is None and "checkpoint" in sent and beat.step >= sent["checkpoint"] + 3:
                kind = "stop"
            if kind is not None:
                push.send(msgspec.json.encode(ControlMessage(kind=kind, job_id="job-c", generation=4)))
                sent[kind] = beat.step
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        pull.close()
        push.close()
        ctx.term()
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    seen = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert seen[0] == seen[1], seen  # both ranks: same requests at the same steps
    # Usually two separate requests; if rank 0 drained both messages in one poll they arrive together.
    assert [e["checkpoint"] for e in seen[0]].count(True) == 1
    assert seen[0][-1]["stop"] and not any(e["stop"] for e in seen[0][:-1])
    ckpt_step = next(e["step"] for e in seen[0] if e["checkpoint"])
    stop_step = seen[0][-1]["step"]
    assert sent["checkpoint"] <= ckpt_step <= stop_step
    assert stop_step >= sent["stop"]
