"""A stand-in trainer worker for the supervisor's unit tests: a real process that speaks the real ZeroMQ
protocol, without torch. Run as ``python fake_worker.py -m myolo.kernels.cli.worker --config job.json`` (the
supervisor's argv with this script as the "interpreter").

Its behaviour comes from ``FAKE_<RANK>`` (else ``FAKE``) in the environment: ``steps:N`` (train N steps, then
exit 0), ``fail:N`` (exit 3 after N steps, printing a traceback-like line), ``silent:N`` (stop talking after N
steps and sleep), ``stubborn`` (train forever, ignore SIGTERM), ``forever`` (train until told to stop),
``starting`` (never through its start-up: no heartbeat, as a rank waiting for peers that are gone).
``FAKE_STEP_S`` is the step time (default 0.02 s).

Run as ``python fake_worker.py -m myolo.kernels.cli.warm`` it is a warm standby: it takes the handoff with the real
``myolo.kernels.cli.warm`` code (ready line, handoff on stdin, log, directory, environment) and then runs as the
worker it was handed. ``FAKE_WARM`` in the standby's environment: ``ok`` (default), ``fail`` (exit 1 before
ready, as an interpreter without torch would), ``slow`` (never ready), ``child`` (before ready, starts a
``sleep`` that inherits its stdout and outlives it; its pid in ``grandchild.pid`` of the standby's directory).
"""

from __future__ import annotations

import os
import signal
import sys
import time

import msgspec
import zmq

from myolo.events.payloads import ControlMessage, TrainingProgress, WorkerHeartbeat


def standby() -> int | None:
    """The standby's life until the handoff; an exit code when it ends there, None once it is a worker."""
    mode = os.environ.get("FAKE_WARM", "ok")
    if mode == "fail":
        print("fake standby: ModuleNotFoundError: No module named 'torch'", file=sys.stderr, flush=True)
        return 1
    if mode == "slow":
        time.sleep(3600)
    if mode == "child":
        import subprocess

        child = subprocess.Popen(["sleep", "120"], stdin=subprocess.DEVNULL)  # stdout: the standby's
        with open("grandchild.pid", "w") as f:
            f.write(str(child.pid))
    from myolo.kernels.cli.warm import become
    from myolo.kernels.cli.warm import standby as wait_for_handoff

    print("a library's import chatter on stdout", flush=True)  # before the ready line: passed over
    handoff = wait_for_handoff()
    if handoff is None:
        return 0
    become(handoff)
    sys.argv = [sys.argv[0], "-m", "myolo.kernels.cli.worker", *handoff.argv]
    print(f"fake standby pid {os.getpid()} took rank {os.environ.get('RANK')}", flush=True)
    return None


def main() -> int:
    if sys.argv[1:3] == ["-m", "myolo.kernels.cli.check_job"]:  # the agent's admission check: every job is fine
        print('{"ok": true}')
        return 0
    if sys.argv[1:3] == ["-m", "myolo.kernels.cli.warm"]:
        code = standby()
        if code is not None:
            return code
    rank = int(os.environ["RANK"])
    mode = os.environ.get(f"FAKE_{rank}") or os.environ.get("FAKE", "steps:5")
    kind, _, arg = mode.partition(":")
    limit = int(arg) if arg else 10**9
    step_s = float(os.environ.get("FAKE_STEP_S", "0.02"))
    job, gen = os.environ["MYOLO_JOB_ID"], int(os.environ["MYOLO_GENERATION"])
    assert sys.argv[1:4] == ["-m", "myolo.kernels.cli.worker", "--config"], sys.argv
    cuda = os.environ.get("CUDA_VISIBLE_DEVICES")
    print(f"fake worker rank {rank} job {job} mode {mode} cuda={cuda!r} cwd={os.getcwd()}", flush=True)
    if kind == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.connect(os.environ["MYOLO_ZMQ_PROGRESS"])
    pull = None
    if rank == 0:
        pull = ctx.socket(zmq.PULL)
        pull.connect(os.environ["MYOLO_ZMQ_CONTROL"])

    last_beat = [float("-inf")]

    def beat(step: int, force: bool = False) -> None:
        """At most one a second unless forced, as the trainer's ``AgentLink.heartbeat``."""
        if not force and time.monotonic() - last_beat[0] < 1.0:
            return
        last_beat[0] = time.monotonic()
        hb = WorkerHeartbeat(
            job_id=job,
            generation=gen,
            rank=rank,
            world_size=int(os.environ["WORLD_SIZE"]),
            step=step,
            pid=os.getpid(),
            sent_at=time.time(),
        )
        push.send_multipart([b"heartbeat", msgspec.json.encode(hb)])

    if kind == "starting":
        time.sleep(3600)
    beat(0, force=True)
    step = 0
    while True:
        if kind == "silent" and step >= limit:
            time.sleep(3600)
        if kind in ("steps", "fail") and step >= limit:
            break
        time.sleep(step_s)
        step += 1
        beat(step)
        record = TrainingProgress(
            job_id=job,
            generation=gen,
            rank=rank,
            world_size=int(os.environ["WORLD_SIZE"]),
            step=step,
            loss=1.0 / step,
            tokens_per_s=100.0,
            step_time_s=step_s,
        )
        push.send_multipart([b"progress", msgspec.json.encode(record)])
        if any(name.startswith("stopped-at-") for name in os.listdir(".")):
            break  # rank 0 was told to stop: every rank stops at the same step, as the trainer agrees
        if pull is not None and pull.poll(0):
            msg = msgspec.json.decode(pull.recv(), type=ControlMessage)
            print(f"control {msg.kind} at step {step}", flush=True)
            if msg.kind == "stop":
                (open(os.path.join(os.getcwd(), f"stopped-at-{step}"), "w")).close()
                break
    if kind == "fail":
        print("Traceback (most recent call last):\nRuntimeError: injected failure", flush=True)
        return 3
    push.close(linger=1000)
    if pull is not None:
        pull.close(linger=0)
    ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
