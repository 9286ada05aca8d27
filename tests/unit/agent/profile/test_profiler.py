"""py-spy on a real Python process: the stacks name its functions; a process that exits while sampled ends
the profile early, which is said; a pid that is not there, or one the kernel will not let py-spy trace, fails
with the reason (and, for ptrace, the fix); the routes serve the record and the stacks, and check the id."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from myolo.agent.profile.profiler import ProfileError, Profiler, find_py_spy
from myolo.agent.profile.routes import routes
from myolo.common.clock import SystemClock

BUSY = "import time\ndef train_step():\n    s = 0\n    for i in range(10**5): s += i\n    return s\nt = time.time()\n"


def _child(seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", BUSY + f"while time.time() - t < {seconds}: train_step()\n"])


async def test_a_process_that_exits_while_sampled_ends_the_profile_early_with_its_stacks(tmp_path: Path) -> None:
    child = _child(2.0)
    profiler = Profiler(tmp_path, SystemClock())
    try:
        rec = await profiler.run("p1", "job", 3, child.pid, 20.0, 50, False)
    finally:
        child.wait()
    assert rec.state == "done" and rec.ended_early and rec.seconds < 19.0 and rec.samples > 10
    assert "train_step" in profiler.data_path("p1").read_text()
    assert profiler.record("p1") == rec
    assert Profiler(tmp_path, SystemClock()).record("p1") == rec  # known to the next agent run too
    with pytest.raises(ProfileError, match="exists already"):
        await profiler.run("p1", "job", 3, child.pid, 1.0, 50, False)


async def test_a_pid_that_is_not_there_fails_with_pyspys_reason(tmp_path: Path) -> None:
    profiler = Profiler(tmp_path, SystemClock())
    with pytest.raises(ProfileError, match="py-spy failed on pid 999999") as exc:
        await profiler.run("gone", "job", 0, 999_999, 2.0, 50, False)
    assert "Stack backtrace" not in str(exc.value)
    rec = profiler.record("gone")
    assert rec is not None and rec.state == "failed" and not profiler.data_path("gone").exists()


async def test_ptrace_denied_says_why_and_how_to_allow_it(tmp_path: Path) -> None:
    """py-spy run as an unprivileged user against our process: the kernel refuses the attach."""
    assert os.geteuid() == 0, "this test runs py-spy as nobody against a root process: run it as root (CI does)"
    wrapper = tmp_path / "py-spy-as-nobody"
    wrapper.write_text(f'#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups -- {find_py_spy()} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    child = _child(10.0)
    try:
        profiler = Profiler(tmp_path / "out", SystemClock(), py_spy=str(wrapper))
        with pytest.raises(ProfileError) as exc:
            await profiler.run("denied", "job", 0, child.pid, 3.0, 50, False)
    finally:
        child.kill()
        child.wait()
    assert f"ptrace of pid {child.pid} denied" in str(exc.value)
    assert "CAP_SYS_PTRACE" in str(exc.value) and "ptrace_scope" in str(exc.value)


async def test_the_routes_serve_the_record_and_the_stacks_and_refuse_odd_ids(tmp_path: Path) -> None:
    child = _child(1.0)
    profiler = Profiler(tmp_path, SystemClock(), keep=2)
    await profiler.run("p1", "job", 0, child.pid, 5.0, 50, False)
    child.wait()
    app = web.Application()
    app.add_routes(routes(profiler))
    async with TestClient(TestServer(app)) as client:
        ok = await client.get("/v1/profiles/p1")
        assert ok.status == 200 and (await ok.json())["state"] == "done"
        folded = await client.get("/v1/profiles/p1/folded")
        assert folded.status == 200 and "train_step" in await folded.text()
        assert (await client.get("/v1/profiles/nope")).status == 404
        odd = await client.get("/v1/profiles/..%2Fetc")
        assert odd.status in (400, 404)
        assert (await client.get("/v1/profiles/a%20b")).status == 400
    async with TestClient(TestServer(_app(None))) as client:
        off = await client.get("/v1/profiles/p1")
        assert off.status == 404 and "off on this node" in (await off.json())["error"]


def _app(profiler: Profiler | None) -> web.Application:
    app = web.Application()
    app.add_routes(routes(profiler))
    return app


async def test_only_the_newest_profiles_are_kept(tmp_path: Path) -> None:
    profiler = Profiler(tmp_path, SystemClock(), keep=2)
    for n in range(3):
        child = _child(0.5)
        await profiler.run(f"p{n}", "job", 0, child.pid, 3.0, 50, False)
        child.wait()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p1.folded", "p1.json", "p2.folded", "p2.json"]
    assert profiler.record("p0") is None
