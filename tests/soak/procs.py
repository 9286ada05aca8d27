"""The soak's view of its processes: which run, their memory over time, their open files and children."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import linear_regression, median

ROLES = ("launcher", "agent", "coordinator", "worker")
MIN_JUDGED_S = 900.0  # a growth judged over less than 15 minutes is warm-up as often as a leak
MAX_JUDGED_S = 1800.0  # what a long soak asks of a process's second half before it judges its slope


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _cwd(pid: int) -> str:
    """Where the process works: a warm standby handed a job keeps its command line but works under the root."""
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def role(cmd: str) -> str | None:
    if "-m myolo.agent.launcher" in cmd:
        return "launcher"
    if "-m myolo.agent run" in cmd:
        return "agent"
    if "myolo.coordinator.cli_daemon" in cmd:
        return "coordinator"
    if "kernels." in cmd:
        return "worker"
    return None


def ours(root: Path) -> dict[int, tuple[str, str]]:
    """pid -> (role, the member it belongs to) for every live process of the stack under ``root``: those
    naming it on their command line, and the workers and standbys they started."""
    cmds: dict[int, str] = {}
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            pid = int(entry.name)
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if stat[0] != "Z":
                cmds[pid], parents[pid] = cmdline(pid), int(stat[1])
    out: dict[int, tuple[str, str]] = {}
    for pid, cmd in cmds.items():
        if (str(root) in cmd or str(root) in _cwd(pid)) and (r := role(cmd)) is not None:
            words = f"{cmd} {_cwd(pid)}".split()
            member = next((p for p in words if "/agents/" in p or "/coordinators/" in p), "")
            name = member.split("/agents/")[-1].split("/coordinators/")[-1].split("/")[0] if member else "?"
            out[pid] = (r, name)
    for pid, cmd in cmds.items():
        if pid in out or role(cmd) != "worker":
            continue
        up = parents.get(pid)
        while up is not None and up not in out and up > 1:
            up = parents.get(up)
        if up in out:
            out[pid] = ("worker", out[up][1])
    return out


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def open_fds(pid: int) -> int | None:
    try:
        return len(list(Path(f"/proc/{pid}/fd").iterdir()))
    except OSError:
        return None


@dataclass
class Series:
    """One process's RSS over time (a restarted process starts a new series)."""

    role: str
    member: str
    pid: int
    points: list[tuple[float, float]] = field(default_factory=list)  # (seconds, MiB)

    def slope_mib_per_h(self, judged_s: float = MIN_JUDGED_S) -> float | None:
        """The least-squares slope over the second half (the first is warm-up); None when that half is too
        short to tell a trend from warm-up (under ``judged_s``: a worker of one generation, a process
        restarted late) or has too few points."""
        half = self.points[len(self.points) // 2 :]
        if len(half) < 8 or half[-1][0] - half[0][0] < judged_s:
            return None
        return linear_regression([t for t, _ in half], [m for _, m in half]).slope * 3600

    @property
    def median_mib(self) -> float:
        return median(m for _, m in self.points)


class Watch:
    """RSS of every process of the stack, sampled by :meth:`sample`; open files at the start and the end.

    A process is judged when its second half spans a quarter of the soak (15 to 30 minutes): an agent
    restarted by a late fault still warms up (pymalloc arenas, caches, windows filling) over the half hour a
    short judgement would see, which reads as a leak; the processes that lived the soak through judge it."""

    def __init__(self, root: Path, soak_s: float = 4 * MIN_JUDGED_S) -> None:
        self.root = root
        self.judged_s = min(MAX_JUDGED_S, max(MIN_JUDGED_S, soak_s / 4))
        self.started = time.monotonic()
        self.series: dict[int, Series] = {}
        self.fds_before = {pid: open_fds(pid) for pid in ours(root)}
        self.roles_before = _count(ours(root))

    def sample(self) -> None:
        now = time.monotonic() - self.started
        for pid, (r, member) in ours(self.root).items():
            mib = rss_mib(pid)
            if mib is not None:
                self.series.setdefault(pid, Series(r, member, pid)).points.append((now, mib))

    def save(self, path: Path) -> None:
        """Every series as JSON (role, member, pid, [seconds, MiB] points): the figures behind the verdicts."""
        path.write_text(json.dumps([asdict(s) for s in self.series.values()]))

    def report(self) -> tuple[list[str], list[str]]:
        """(lines to print, problems): RSS slopes against the bound, open files and processes before/after."""
        lines, problems, unjudged = [], [], 0
        for s in sorted(self.series.values(), key=lambda s: (s.role, s.member, s.pid)):
            slope = s.slope_mib_per_h(self.judged_s)
            if slope is None:
                unjudged += 1
                continue
            bound = max(2.0, 0.05 * s.median_mib)  # 5 % of its size per hour, at least 2 MiB/h
            verdict = "ok" if slope < bound else "GROWS"
            lines.append(
                f"  {s.role:11} {s.member:14} pid {s.pid:7}: RSS median {s.median_mib:6.1f} MiB, slope "
                f"{slope:+6.2f} MiB/h (bound {bound:.1f}) {verdict}"
            )
            if verdict != "ok":
                problems.append(f"{s.role} {s.member} (pid {s.pid}) RSS grows {slope:+.2f} MiB/h")
        lines.append(f"  {unjudged} process(es) lived too briefly to judge a slope (under {2 * self.judged_s:.0f} s)")
        now = ours(self.root)
        for pid, before in self.fds_before.items():
            after = open_fds(pid)
            if before is None or after is None:
                continue
            lines.append(f"  open files of {now.get(pid, ('?', '?'))[0]} pid {pid}: {before} -> {after}")
            if after > before + 16:
                problems.append(f"pid {pid} holds {after - before} more open files than at the start")
        roles_after = _count(now)
        lines.append(f"  processes before: {self.roles_before}; after: {roles_after}")
        for r in ("launcher", "agent", "coordinator"):
            if roles_after.get(r, 0) != self.roles_before.get(r, 0):
                problems.append(f"{r}s: {self.roles_before.get(r, 0)} at the start, {roles_after.get(r, 0)} at the end")
        if roles_after.get("worker", 0) > self.roles_before.get("worker", 0):
            problems.append(f"workers: {self.roles_before.get('worker', 0)} before, {roles_after['worker']} after")
        return lines, problems


def _count(procs: dict[int, tuple[str, str]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r, _ in procs.values():
        out[r] = out.get(r, 0) + 1
    return out
