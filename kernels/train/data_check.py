"""The data file's SHA-256 against what the job recorded, on rank 0 at start: hours of training must not run
on other bytes than the ones the job (and its lineage in the registry) names.

Optional and once: only a job that sets ``data_sha256`` pays for it, and only rank 0 reads the file (the others
meet it at the first collective; a refusal ends the whole run, as any worker's failure does). The same digest
is what ``myoloctl preflight`` asks each node's agent for before an upgrade.
"""

from __future__ import annotations

from events.digest import sha256_file
from kernels.train.config import JobConfig, JobConfigError


def check_data_sha256(job: JobConfig, rank: int) -> None:
    """JobConfigError naming ``data_sha256`` when ``data_path``'s bytes hash to another digest (or cannot be
    read). Nothing to do off rank 0 or when the job recorded no digest."""
    if rank != 0 or job.data_sha256 is None or job.data_path is None:
        return
    try:
        actual = sha256_file(job.data_path).sha256
    except OSError as exc:
        raise JobConfigError(
            f"--data {job.data_path!r}: cannot read it to check data_sha256: {exc}", "data_sha256"
        ) from None
    if actual != job.data_sha256:
        raise JobConfigError(
            f"data_sha256: {job.data_path!r} hashes to {actual}, not the {job.data_sha256} the job recorded: the "
            "data changed (or the job names the wrong file); restore the file, or record its new digest in "
            "the job's dataSha256",
            "data_sha256",
        )
