"""The ``runtime_versions`` action: the trainer interpreter's CUDA stack beside the driver's, for pre-flight.

The agent never imports torch: it runs ``python -m myolo.kernels.cli.versions`` in the workers' interpreter and
environment (the trainer's release first on PYTHONPATH, the workers' directory as cwd), as the job check does,
bounded by ``timeout_s``. What the interpreter cannot say is the answer's ``error``, not a failed command.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from myolo.agent.gpu import GpuBackend
from myolo.agent.rdma.action import TOOL as RDMA_TOOL
from myolo.agent.trainer.ask import ask
from myolo.events.payloads.commands import RuntimeVersions, RuntimeVersionsArgs


async def trainer_versions(
    python: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None, cwd: str | Path | None = None
) -> RuntimeVersions:
    try:
        answer = await ask([*python, "-m", "myolo.kernels.cli.versions"], timeout_s, env=env, cwd=cwd)
    except OSError as exc:
        return RuntimeVersions(error=f"cannot run the trainer's interpreter {list(python)}: {exc}; set trainer.python")
    if answer is None:
        return RuntimeVersions(error=f"the trainer's interpreter did not answer within {timeout_s:g} s")
    try:
        return msgspec.json.decode(answer.last_line(), type=RuntimeVersions)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return RuntimeVersions(
            error=f"the trainer's interpreter failed (exit {answer.returncode}): {answer.last_error()}"
        )


def runtime_versions_action(
    backend: GpuBackend,
    python: Callable[[], Sequence[str]],
    env: Callable[[], Mapping[str, str]],
    cwd: Callable[[], str | Path | None],
) -> Callable[..., Any]:
    """The action callable for the executor's table: ``runtime_versions(RuntimeVersionsArgs)``."""

    async def runtime_versions(args: RuntimeVersionsArgs) -> RuntimeVersions:
        where = cwd()  # the workers' directory (a source checkout in the agent's cwd would shadow the release)
        found = await trainer_versions(
            python(), args.timeout_s, env(), where if where and Path(where).is_dir() else None
        )
        return msgspec.structs.replace(
            found,
            driver=backend.driver_version(),
            driver_cuda=backend.cuda_version(),
            simulated=backend.name == "sim",
            ib_write_lat=shutil.which(RDMA_TOOL),
        )

    return runtime_versions
