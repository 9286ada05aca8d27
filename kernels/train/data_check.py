"""The input files' SHA-256 against what the job recorded, on rank 0 at start: hours of training (or a
quantization) must not run on other bytes than the ones the job (and its lineage in the registry) names.

Optional and once: only a job that sets ``data.sha256`` (of ``data.path``) or ``checkpoint.init_from_sha256``
(of ``checkpoint.init_from``) pays for it, and only rank 0 reads the file (the others meet it at the first collective; a
refusal ends the whole run, as any worker's failure does). The data digest is also what ``myoloctl preflight``
asks each node's agent for before an upgrade.
"""

from __future__ import annotations

from myolo.common.digest import sha256_file
from myolo.kernels.train.config import JobConfig, JobConfigError

# (section, the file's field, its digest's field, the digest's manifest key)
CHECKED = (
    ("data", "path", "sha256", "spec.trainer.data.sha256"),
    ("checkpoint", "init_from", "init_from_sha256", "spec.trainer.checkpoint.initFromSha256"),
)


def check_inputs_sha256(job: JobConfig, rank: int) -> None:
    """JobConfigError naming the digest field when a file's bytes hash to another digest (or cannot be read).
    Nothing to do off rank 0 or for a file whose digest the job did not record."""
    if rank != 0:
        return
    for section_name, path_field, digest_field, manifest_key in CHECKED:
        section = getattr(job, section_name)
        path, expected = getattr(section, path_field), getattr(section, digest_field)
        if path is None or expected is None:
            continue
        digest = f"{section_name}.{digest_field}"
        try:
            actual = sha256_file(path).sha256
        except OSError as exc:
            raise JobConfigError.at(digest, f"cannot read {path!r} to check it: {exc}") from None
        if actual != expected:
            raise JobConfigError.at(
                digest,
                f"{path!r} hashes to {actual}, not the {expected} the job recorded: the file changed (or the job "
                f"names the wrong file); restore the file, or record its new digest in the job's {manifest_key}",
            )
