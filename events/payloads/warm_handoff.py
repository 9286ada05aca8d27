"""Agent -> warm standby worker: the one message that turns a waiting process into a job's worker.

A standby (``python -m myolo.kernels.cli.warm``) has already imported torch and the trainer. It writes
``READY_LINE`` on its stdout when its imports are done; the agent then writes one ``WarmHandoff`` as a JSON
line on its stdin and closes it, and the standby becomes exactly the worker ``python -m myolo.kernels.cli.worker
<argv>`` started with that environment, directory and log. It lives here, beside the workers' ZeroMQ
messages, so the agent encodes it without importing ``kernels``.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

READY_LINE = b"ready\n"
MAX_HANDOFF_BYTES = 4 << 20  # the JSON line, newline included

_NO_NUL = r"^[^\x00]*$"  # putenv, chdir and open refuse an embedded NUL
EnvName = Annotated[str, msgspec.Meta(min_length=1, max_length=256, pattern=r"^[^=\x00]+$")]
EnvValue = Annotated[str, msgspec.Meta(max_length=128 * 1024, pattern=_NO_NUL)]
Arg = Annotated[str, msgspec.Meta(max_length=4096, pattern=_NO_NUL)]
PathStr = Annotated[str, msgspec.Meta(min_length=1, max_length=4096, pattern=_NO_NUL)]


class WarmHandoff(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``env`` replaces the standby's whole environment (the one a cold worker would be started with);
    ``argv`` are the worker's arguments after ``-m myolo.kernels.cli.worker``; stdout and stderr are appended to
    ``log``; ``cwd`` is the working directory."""

    env: Annotated[dict[EnvName, EnvValue], msgspec.Meta(max_length=4096)]
    argv: Annotated[list[Arg], msgspec.Meta(max_length=256)]
    cwd: PathStr
    log: PathStr
