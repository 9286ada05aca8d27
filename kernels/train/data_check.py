"""The input files' SHA-256 against what the job recorded, on rank 0 at start: hours of training (or a
quantization) must not run on other bytes than the ones the job (and its lineage in the registry) names.

Optional and once: only a job that sets ``data_sha256`` (of ``data_path``) or ``init_from_sha256`` (of
``init_from``) pays for it, and only rank 0 reads the file (the others meet it at the first collective; a
refusal ends the whole run, as any worker's failure does). The data digest is also what ``myoloctl preflight``
asks each node's agent for before an upgrade.
"""

from __future__ import annotations

from myolo.common.digest import sha256_file
from myolo.kernels.train.config import JobConfig, JobConfigError

CHECKED = (
    ("data_path", "data_sha256", "--data", "dataSha256"),
    ("init_from", "init_from_sha256", "--init-from", "initFromSha256"),
)


def check_inputs_sha256(job: JobConfig, rank: int) -> None:
    """JobConfigError naming the digest field when a file's bytes hash to another digest (or cannot be read).
    Nothing to do off rank 0 or for a file whose digest the job did not record."""
    if rank != 0:
        return
    for path_field, digest_field, flag, manifest_key in CHECKED:
        path, expected = getattr(job, path_field), getattr(job, digest_field)
        if path is None or expected is None:
            continue
        try:
            actual = sha256_file(path).sha256
        except OSError as exc:
            raise JobConfigError(
                f"{flag} {path!r}: cannot read it to check {digest_field}: {exc}", digest_field
            ) from None
        if actual != expected:
            raise JobConfigError(
                f"{digest_field}: {path!r} hashes to {actual}, not the {expected} the job recorded: the file "
                f"changed (or the job names the wrong file); restore the file, or record its new digest in the "
                f"job's {manifest_key}",
                digest_field,
            )
