"""The version a component runs without a release (its base install), recorded when the first release
replaces it so a rollback can name it: the coordinator rolls a node back to the version it reported before.

The agent knows its own (``agent.__version__``, while it runs its base install). The trainer's is what the
trainer's interpreter finds with the workers' environment, asked in a subprocess: it may be another venv.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence

import structlog

log = structlog.get_logger("myolo.agent.releases")
DIST = "myolotrain"
ASK = f"import importlib.metadata as m; print(m.version({DIST!r}))"


async def interpreter_version(python: Sequence[str], env: Mapping[str, str], timeout_s: float = 30.0) -> str | None:
    """The version of ``myolotrain`` that ``python`` imports first with ``env``; None when it cannot tell."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *python,
            "-P",
            "-c",
            ASK,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        log.warning("cannot ask the trainer's interpreter for its version", python=list(python), error=str(exc))
        return None
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return None
    version = out.decode(errors="replace").strip()
    if proc.returncode != 0 or not version:
        log.warning(
            "the trainer's interpreter does not say its version",
            python=list(python),
            error=err.decode(errors="replace").strip()[-300:],
        )
        return None
    return version
