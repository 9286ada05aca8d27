"""Ask the trainer's interpreter something in a child process, bounded in time (the agent never imports torch).

One place for what every such question needs: the interpreter may be missing (``OSError``), may not answer in
time (killed, then None), or may answer; the caller reads the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Answer:
    returncode: int | None
    stdout: bytes
    stderr: bytes

    def last_line(self) -> bytes:
        """The last line of standard output (where the trainer's tools write their one JSON answer)."""
        out = self.stdout.strip()
        return out.splitlines()[-1] if out else b""

    def last_error(self) -> str:
        """The last line of standard error, or ``no output``."""
        return (self.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"])[0][:500]


async def ask(
    argv: Sequence[str],
    timeout_s: float,
    *,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
) -> Answer | None:
    """Run ``argv`` to its end or ``timeout_s`` (then kill it: None). Raises ``OSError`` when it cannot start."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return None
    return Answer(proc.returncode, out, err)
