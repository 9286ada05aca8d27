"""`make demo` (`python -m myolo.coordinator.localstack.demo --down`): a job runs, a GPU fails, it shrinks and grows back."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from myolo.coordinator.localstack import stack
from myolo.coordinator.localstack.broker import LocalBroker
from tests.support.helpers import pids_mentioning

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.kafka
def test_demo_shrinks_the_job_on_a_gpu_failure_grows_it_back_and_stops_cleanly(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYOLO_")}
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "myolo.coordinator.localstack.demo",
                "--state-dir",
                str(tmp_path),
                "--down",
                "--timeout",
                "120",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=420,
            check=False,
        )
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out
        assert "job/tiny-pretrain created" in out
        took = re.search(r"node-2 cordoned ([\d.]+) s after the injection, by auto:fault", out)
        assert took is not None, out
        shrunk = re.search(
            r"tiny-pretrain generation (\d+): 2 replicas on node-1, node-3, resumed after step (\d+)", out
        )
        assert shrunk is not None, out
        grown = out.split("the job grows back after its cooldown")[1].split("== What the coordinators know")[0]
        assert re.search(r"tiny-pretrain\s+Running\s+3/1-3", grown), grown
        describe = out.split("== What the coordinators know about tiny-pretrain")[1].split("== Stop the stack")[0]
        for kind in ("start", "shrink", "grow"):
            assert re.search(rf"\b{kind}\b", describe), describe
        assert re.search(r"node-2 (was cordoned|has FAIL health)", describe), describe
        assert "Kafka stopped" in out.split("== Stop the stack")[1]
        assert pids_mentioning(str(tmp_path)) == []
    finally:
        stack.stop_members(tmp_path, progress=lambda _: None)
        LocalBroker(tmp_path).clean()
        for pid in pids_mentioning(str(tmp_path)):
            os.kill(pid, signal.SIGKILL)
