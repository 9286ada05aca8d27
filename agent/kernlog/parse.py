"""One kernel log line to the XID it reports, whichever way the line was read.

The driver writes ``NVRM: Xid (PCI:0000:3b:00): 79, pid=1927, name=python3, GPU has fallen off the bus.``
(older drivers: ``(0000:3b:00)`` without ``PCI:``, and no ``pid=``/``name=``). The line may come from
/dev/kmsg (``4,1234,5678901,-;NVRM: ...``), ``dmesg`` (``[ 1234.5] NVRM: ...``) or the journal
(``Dec 05 12:00:01 node kernel: NVRM: ...``): the parser looks for the marker wherever it is. Lines are hostile
input: they are cut to ``MAX_LINE_CHARS`` before anything else, and anything that does not read is None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_LINE_CHARS = 2048
MAX_XID = 9999
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{1,2}:[0-9A-Fa-f]{1,2})(?:\.[0-7])?\): "
    r"(?P<xid>\d{1,4}),\s*(?P<rest>.*)$"
)
_PID = re.compile(r"^pid=(?P<pid>'?<?[^,]{0,32}?>?'?),\s*")
_NAME = re.compile(r"^name=(?P<name>[^,]{0,64}),\s*")
_PCI = re.compile(r"^(?:PCI:)?([0-9A-Fa-f]{1,8}):([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})(?:\.[0-7])?$")


@dataclass(frozen=True, slots=True)
class KernelXid:
    """An XID as the kernel logged it: the GPU's PCI address (``pci_key`` form), the code, the process the
    driver named (None when it did not: ``pid='<unknown>'``), the driver's words and the line itself."""

    bus: str
    xid: int
    pid: int | None
    name: str | None
    text: str
    line: str


def summary(found: KernelXid) -> str:
    """The line without what the fault says already (the XID, the GPU): who ran, and the driver's words."""
    who = f"pid {found.pid}" + (f" ({found.name})" if found.name else "") if found.pid is not None else found.name
    return f"kernel log: {who}: {found.text}" if who else f"kernel log: {found.text}"


def pci_key(address: str) -> str | None:
    """``domain:bus:device`` in lower-case hex with fixed widths (``0000:3b:00``), from the kernel's
    ``PCI:0000:3b:00`` or NVML's ``00000000:3B:00.0``; None when it is not a PCI address."""
    m = _PCI.match(address.strip())
    if m is None:
        return None
    domain, bus, device = (int(p, 16) for p in m.groups())
    if domain > 0xFFFF:
        return None
    return f"{domain:04x}:{bus:02x}:{device:02x}"


def parse_line(raw: str | bytes) -> KernelXid | None:
    """The XID of one ``NVRM: Xid`` line; None for any other line (or one that does not read)."""
    if isinstance(raw, bytes):
        raw = raw[: MAX_LINE_CHARS * 4].decode("utf-8", errors="replace")
    line = raw[:MAX_LINE_CHARS].rstrip("\r\n")
    at = line.find("NVRM: Xid")
    if at < 0:
        return None
    m = _XID.search(line, at)
    if m is None:
        return None
    bus = pci_key(m["bus"])
    xid = int(m["xid"])
    if bus is None or not 0 < xid <= MAX_XID:
        return None
    rest, pid, name = m["rest"], None, None
    if pm := _PID.match(rest):
        pid = int(pm["pid"]) if pm["pid"].isdigit() else None
        rest = rest[pm.end() :]
    if nm := _NAME.match(rest):
        name = nm["name"] if nm["name"] not in ("<unknown>", "'<unknown>'") else None
        rest = rest[nm.end() :]
    return KernelXid(bus=bus, xid=xid, pid=pid, name=name, text=rest.strip(), line=line[at:])
