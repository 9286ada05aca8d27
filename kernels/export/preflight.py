"""Checks of the export's inputs at start-up, on the rank that uses them: hours of training must not end in
"the held-out file does not exist". Paths resolve in the workers' directory, which is why ``JobConfig.
validate`` (also run by the agent, elsewhere) leaves them to this."""

from __future__ import annotations

import os
from pathlib import Path

from myolo.kernels.data.tokenfile import TokenFile
from myolo.kernels.train.config import JobConfig, JobConfigError


def check_export_inputs(job: JobConfig, rank: int) -> None:
    """On rank 0 (the one that exports): the held-out file is a token file with at least one sequence, and
    the export's folder can be written. JobConfigError names the field."""
    if rank != 0 or job.checkpoint.export_path is None:
        return
    if job.data.eval_path is not None:
        try:
            TokenFile(job.data.eval_path, job.data.global_batch, job.data.seq_len, dtype=job.data.dtype)
        except (OSError, ValueError) as exc:
            raise JobConfigError.at("data.eval_path", str(exc)) from None
    folder = Path(job.checkpoint.export_path).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise JobConfigError.at(
            "checkpoint.export_path", f"{job.checkpoint.export_path!r}: cannot create its folder: {exc}"
        ) from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise JobConfigError.at(
            "checkpoint.export_path",
            f"{job.checkpoint.export_path!r}: its folder {folder} is not writable by this worker; choose another",
        )
