"""The ``[kernel_log]`` section: where the agent reads the driver's ``NVRM: Xid`` lines, and how it pairs them
with NVML's events."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from myolo.agent.kernlog.dedup import DEFAULT_WINDOW_S

KMSG = "/dev/kmsg"
JOURNAL_COMMAND = ["journalctl", "--dmesg", "--follow", "--lines=0", "--output=cat"]


class KernelLogConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``source``: ``auto`` reads ``path`` (/dev/kmsg) on real GPUs when the agent may, and nothing on simulated
    ones; ``kmsg`` reads ``path`` (a missing permission is logged and the rest of the agent runs on);
    ``journal`` follows ``journal_command``'s output; ``off`` reads nothing. ``dedup_window_s``: an XID that
    NVML and the kernel both report within it is published once."""

    source: Literal["auto", "kmsg", "journal", "off"] = "auto"
    path: Annotated[str, msgspec.Meta(min_length=1, max_length=4096)] = KMSG
    journal_command: Annotated[list[str], msgspec.Meta(min_length=1, max_length=32)] = msgspec.field(
        default_factory=lambda: list(JOURNAL_COMMAND)
    )
    poll_interval_s: Annotated[float, msgspec.Meta(gt=0, le=60)] = 1.0
    dedup_window_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = DEFAULT_WINDOW_S
    from_start: bool = False  # read the records already in the buffer (kmsg): XIDs since boot, again
