"""The version a component runs without a release (its base install), recorded when the first release
replaces it so a rollback can name it: the coordinator rolls a node back to the version it reported before.

The agent knows its own (``agent.__version__``, while it runs its base install). The trainer's is what the
trainer's interpreter finds with the workers' environment, asked in a subprocess: it may be another venv.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import structlog

from myolo.agent.trainer.ask import ask

log = structlog.get_logger("myolo.agent.releases")
DIST = "myolotrain"
ASK = f"import importlib.metadata as m; print(m.version({DIST!r}))"


async def interpreter_version(python: Sequence[str], env: Mapping[str, str], timeout_s: float = 30.0) -> str | None:
    """The version of ``myolotrain`` that ``python`` imports first with ``env``; None when it cannot tell."""
    try:
        answer = await ask([*python, "-P", "-c", ASK], timeout_s, env=env)
    except OSError as exc:
        log.warning("cannot ask the trainer's interpreter for its version", python=list(python), error=str(exc))
        return None
    if answer is None:
        return None
    version = answer.stdout.decode(errors="replace").strip()
    if answer.returncode != 0 or not version:
        log.warning(
            "the trainer's interpreter does not say its version",
            python=list(python),
            error=answer.stderr.decode(errors="replace").strip()[-300:],
        )
        return None
    return version
