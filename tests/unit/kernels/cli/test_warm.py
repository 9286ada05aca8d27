"""The warm standby worker (``python -m myolo.kernels.cli.warm``): its handoff, and that the worker it becomes is the
worker a cold start gives (real torch, gloo, the ``tiny`` model)."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from myolo.events.payloads.warm_handoff import MAX_HANDOFF_BYTES, READY_LINE, WarmHandoff
from myolo.kernels.cli.warm import HandoffError, read_handoff

REPO = Path(__file__).resolve().parents[4]
JOB = ["--model", "tiny", "--steps", "3", "--global-batch", "4", "--seq-len", "16", "--seed", "0"]


def python(*args: str, env: dict[str, str], **kw) -> subprocess.CompletedProcess:
    """The trainer's interpreter on ``args`` in the repository, output captured."""
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, timeout=300, **kw)


def line(**fields) -> bytes:
    body = {"env": {"A": "1"}, "argv": ["--config", "job.json"], "cwd": "/tmp", "log": "/tmp/x.log", **fields}
    return json.dumps(body).encode() + b"\n"


def test_read_handoff() -> None:
    assert read_handoff(io.BytesIO(b"")) is None  # retired: stdin closed without a message
    got = read_handoff(io.BytesIO(line()))
    assert got == WarmHandoff(env={"A": "1"}, argv=["--config", "job.json"], cwd="/tmp", log="/tmp/x.log")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (line()[:-1], "without a newline"),
        (b"{" + b" " * MAX_HANDOFF_BYTES + b"}\n", f"longer than {MAX_HANDOFF_BYTES} bytes"),
        (b"not json\n", "not a WarmHandoff"),
        (line(env={"A=B": "1"}), "$.env"),
        (line(argv=["a\x00b"]), "$.argv[0]"),
        (line(log=""), "$.log"),
        (line(extra=1), "extra"),
    ],
)
def test_a_bad_handoff_is_refused_naming_what(data: bytes, why: str) -> None:
    with pytest.raises(HandoffError) as err:
        read_handoff(io.BytesIO(data))
    assert why in str(err.value)


BECOME = r"""
import json, os, sys
from myolo.kernels.cli.warm import become, standby
handoff = standby()
become(handoff)
print("to stdout", flush=True)
print("to stderr", file=sys.stderr, flush=True)
print(json.dumps({"env": dict(os.environ), "cwd": os.getcwd(), "stdin": os.read(0, 10).decode()}), flush=True)
"""


def test_become_takes_the_log_the_directory_and_the_whole_environment(tmp_path: Path) -> None:
    run_dir, log = tmp_path / "run", tmp_path / "run" / "rank-3.log"
    run_dir.mkdir()
    log.write_text("earlier line\n")
    env = {"RANK": "3", "ONLY_IN_HANDOFF": "yes", "PATH": os.environ["PATH"]}
    handoff = msgspec.json.encode(WarmHandoff(env=env, argv=[], cwd=str(run_dir), log=str(log))) + b"\n"
    done = python("-c", BECOME, env={**os.environ, "ONLY_IN_STANDBY": "yes"}, input=handoff)
    assert done.returncode == 0, done.stderr
    assert done.stdout == READY_LINE and done.stderr == b""  # after the handoff, everything went to the log
    lines = log.read_text().splitlines()
    assert lines[:3] == ["earlier line", "to stdout", "to stderr"]  # appended
    seen = json.loads(lines[3])
    assert seen["env"] == env and seen["cwd"] == str(run_dir) and seen["stdin"] == ""


PRELOAD = r"""
import json, os, torch
calls = []
for name in ("_cuda_getDeviceCount", "_cuda_init"):
    real = getattr(torch._C, name, None)
    if real is not None:
        setattr(torch._C, name, lambda *a, _n=name, _r=real: (calls.append(_n), _r(*a))[1])
from myolo.kernels.cli.warm import PRELOAD, apply_thread_count, cuda_touched, preload
preload(PRELOAD, nice=7)
default = torch.get_num_threads()
os.environ["OMP_NUM_THREADS"] = str(default + 1)
apply_thread_count()
print(json.dumps({"calls": calls, "touched": cuda_touched(), "default": default,
                  "threads": torch.get_num_threads(), "nice": os.getpriority(os.PRIO_PROCESS, 0)}))
"""


def test_the_preload_leaves_cuda_alone_and_the_process_unniced() -> None:
    done = python("-c", PRELOAD, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    # nothing asked the CUDA driver: it would have read CUDA_VISIBLE_DEVICES once, before the handoff's
    assert seen["calls"] == [] and seen["touched"] is None
    assert seen["threads"] == seen["default"] + 1  # the handoff's OMP_NUM_THREADS is applied
    assert seen["nice"] == 0  # only the import thread was niced


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def losses(text: str) -> dict[int, float]:
    records = [json.loads(ln.removeprefix("@myolo ")) for ln in text.splitlines() if ln.startswith("@myolo {")]
    return {r["step"]: r["loss"] for r in records if r["event"] == "step"}


def worker_env() -> dict[str, str]:
    return {
        **os.environ,
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONUNBUFFERED": "1",
    }


def test_a_standby_handed_a_job_trains_it_as_a_cold_worker_would(tmp_path: Path) -> None:
    cold = python("-m", "myolo.kernels.cli.worker", *JOB, env=worker_env(), text=True)
    assert cold.returncode == 0, cold.stderr[-3000:]
    expected = losses(cold.stdout)
    assert sorted(expected) == [1, 2, 3]

    standby_env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "OMP_NUM_THREADS")}
    standby_env |= {"CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1"}
    standbys = [
        subprocess.Popen(
            [sys.executable, "-m", "myolo.kernels.cli.warm", "--nice", "5"],
            cwd=REPO,
            env=standby_env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=(tmp_path / f"warm-{i}.log").open("wb"),
            start_new_session=True,
        )
        for i in range(2)
    ]
    try:
        for p in standbys:
            assert p.stdout is not None and p.stdout.readline() == READY_LINE, (tmp_path / "warm-0.log").read_text()
        used, retired = standbys
        log = tmp_path / "run" / "rank-0.log"
        log.parent.mkdir()
        handoff = WarmHandoff(env=worker_env(), argv=JOB, cwd=str(log.parent), log=str(log))
        assert used.stdin is not None and retired.stdin is not None
        used.stdin.write(msgspec.json.encode(handoff) + b"\n")
        used.stdin.close()
        retired.stdin.close()
        assert retired.wait(60) == 0  # closed without a message: leaves quietly
        assert used.wait(300) == 0, log.read_text()[-3000:]
        assert used.stdout is not None and used.stdout.read() == b""  # its output went to the log
        assert losses(log.read_text()) == expected
    finally:
        for p in standbys:
            if p.poll() is None:
                p.kill()
                p.wait()
