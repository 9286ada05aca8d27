"""``runtime_versions``: the trainer interpreter's CUDA stack (asked in a subprocess: the agent never imports
torch), beside the driver's; an interpreter that cannot answer is the answer's error, never an exception."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from myolo.agent.gpu import SimBackend
from myolo.agent.trainer.versions import runtime_versions_action, trainer_versions
from myolo.common.clock import SimClock
from myolo.events.payloads.commands import RuntimeVersionsArgs
from myolo.kernels.cli.versions import cudnn_text


def fake_python(tmp_path: Path, body: str) -> list[str]:
    exe = tmp_path / "python"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return [str(exe)]


async def test_the_action_adds_the_drivers_versions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = fake_python(tmp_path, 'echo \'{"torch": "2.4.0", "cuda": "12.4", "cudnn": "9.1.0", "gpus_visible": 2}\'\n')
    monkeypatch.setenv("PATH", str(tmp_path))  # no ib_write_lat here
    backend = SimBackend(2, SimClock())
    action = runtime_versions_action(backend, lambda: python, lambda: {"PATH": str(tmp_path)}, lambda: tmp_path / "no")
    found = await action(RuntimeVersionsArgs(timeout_s=10))
    assert (found.torch, found.cuda, found.cudnn, found.gpus_visible) == ("2.4.0", "12.4", "9.1.0", 2)
    assert (found.driver, found.driver_cuda) == (backend.driver_version(), backend.cuda_version())
    assert found.simulated and found.ib_write_lat is None and found.error is None
    (tmp_path / "ib_write_lat").write_text("#!/bin/sh\n")
    (tmp_path / "ib_write_lat").chmod(0o755)
    assert (await action(RuntimeVersionsArgs(timeout_s=10))).ib_write_lat == str(tmp_path / "ib_write_lat")


async def test_an_interpreter_that_cannot_answer_is_the_answers_error(tmp_path: Path) -> None:
    missing = await trainer_versions([str(tmp_path / "nope")], 10)
    assert missing.error is not None and "set trainer.python" in missing.error
    broken = await trainer_versions(fake_python(tmp_path, "echo 'ModuleNotFoundError: torch' >&2; exit 1\n"), 10)
    assert broken.error is not None and "exit 1" in broken.error and "ModuleNotFoundError" in broken.error


async def test_the_real_trainer_interpreter_answers() -> None:
    found = await trainer_versions([sys.executable], 120)
    assert found.error is None and found.torch  # a CPU build says cuda None; a CUDA build its version


def test_cudnn_versions_read_as_their_releases() -> None:
    assert (cudnn_text(90100), cudnn_text(8902), cudnn_text(None)) == ("9.1.0", "8.9.2", None)
