"""Checking an archive's records against the coordinators' key before restoring them.

A coordinator applies only the state records sealed with its key (myolo.coordinator.state.seal); a backup restored for
coordinators holding another key would be read as forged, record by record, and the cluster would start empty.
With the key given, ``restore`` checks every seal the way the coordinators will, before writing anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from myolo.coordinator.backup.archive import Archive
from myolo.coordinator.state.codec import record_kind
from myolo.coordinator.state.seal import ForgedStateRecord, StateKeys


@dataclass
class SealReport:
    checked: int
    current: int  # sealed with the key given (the others that verify: with a previous key of a rotation)
    failed: int
    first: list[str]  # "<topic> key <key>: <reason>" of the first records that failed


def check_seals(archive: Archive, keys: StateKeys, show: int = 5) -> SealReport:
    checked = current = failed = 0
    first: list[str] = []
    for topic, records in archive.records.items():
        for r in records:
            checked += 1
            try:
                if r.key is None:
                    raise ForgedStateRecord("record has no key")
                current += keys.check(topic, r.key, record_kind(r.headers) or "", r.value, r.headers)
            except ForgedStateRecord as exc:
                failed += 1
                if len(first) < show:
                    first.append(f"{topic} key {(r.key or b'').decode(errors='replace')[:80]!r}: {exc}")
    return SealReport(checked=checked, current=current, failed=failed, first=first)
