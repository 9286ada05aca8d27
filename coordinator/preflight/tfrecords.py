"""The TFRecord check: which jobs read TFRecord files, and the row each job gets from its node's answer.

A job reads TFRecord files when its ``dataPath`` names them: ``train.tfrecord``, ``x.tfrecords``,
``train.tfrecord-00003-of-00064``, or a glob of them (``/data/train-*.tfrecord``), which the node's agent
expands. Compressed files (``.gz``, ``.zlib``) frame compressed bytes and are not checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from myolo.coordinator.jobs.interface import JobData
from myolo.coordinator.preflight.records import CheckResult
from myolo.events.payloads.commands import TfRecordPattern

_TFRECORD = re.compile(r"\.tfrecords?(?![A-Za-z0-9])", re.IGNORECASE)
_COMPRESSED = (".gz", ".gzip", ".zlib", ".zz")
THRESHOLD = "every record's length and masked CRC-32C"
MAX_NAMED = 3  # bad files named in a row's reason


@dataclass
class TfRecordData:
    """A job's TFRecord path or pattern to check on a node (its member)."""

    job: str
    path: str


def is_tfrecord(path: str) -> bool:
    return bool(_TFRECORD.search(path.rsplit("/", 1)[-1]))


def tfrecord_data(node_id: str, jobs: Iterable[JobData]) -> tuple[list[TfRecordData], list[CheckResult]]:
    """The TFRecord data of the jobs whose current generation runs on the node, and a SKIP row for each job of
    TFRecord data that cannot be checked (a relative path, compressed files)."""
    data, skipped = [], []
    for rec in jobs:
        path = rec.data_path
        if path is None or not is_tfrecord(path):
            continue
        why = None
        if not path.startswith("/"):
            why = "dataPath is relative: it resolves in the workers' run directory, not the agent's; give it whole"
        elif path.lower().endswith(_COMPRESSED):
            why = "compressed TFRecord files frame compressed bytes: their records are not checked"
        if why is None:
            data.append(TfRecordData(rec.job, path))
        else:
            skipped.append(
                CheckResult(
                    node_id=node_id, check="tfrecord", verdict="SKIP", subject=f"job/{rec.job} {path}", reason=why
                )
            )
    return data, skipped


def judge(node_id: str, job: str, path: str, found: TfRecordPattern | None) -> CheckResult:
    """The node's answer for a job's TFRecord path: PASS when every file it matched reads to its end."""
    row = CheckResult(
        node_id=node_id, check="tfrecord", verdict="FAIL", subject=f"job/{job} {path}", threshold=THRESHOLD
    )
    if found is None:
        row.reason = f"the agent's answer does not mention {path}"
        return row
    if found.error is not None:
        row.reason = f"{path} on {node_id}: {found.error}"
        return row
    files = found.files
    records, data = sum(f.records for f in files), sum(f.bytes for f in files)
    row.value = f"{len(files)} file(s), {records} records, {data} bytes" + (
        " (more not checked)" if found.truncated else ""
    )
    bad = [f for f in files if f.error is not None]
    if not bad:
        row.verdict, row.reason = "PASS", f"every record of {len(files)} file(s) has its length and CRC right"
        return row
    named = "; ".join(f"{f.path}: {f.error}" for f in bad[:MAX_NAMED])
    more = f" (and {len(bad) - MAX_NAMED} more file(s))" if len(bad) > MAX_NAMED else ""
    corrupt = any(f.bad_offset is not None for f in bad)
    fix = (
        "the data are corrupt from that byte on: copy the files again from their source (and check the disk)"
        if corrupt
        else "make the files readable by the agent on this node"
    )
    row.reason = f"{len(bad)} of {len(files)} file(s) on {node_id} fail: {named}{more}; {fix}"
    return row
