"""Installing real wheels as release directories: verified or refused, never half-way, idempotent per hash."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from myolo.agent.releases import ReleaseError, ReleasesConfig, ReleaseStore
from myolo.agent.releases.install import check_upgrade, install_release
from tests.support.agent.wheels import build_wheel, sha256_of
from tests.support.helpers import wait_until

PIP = (sys.executable,)
CFG = ReleasesConfig(dir="/unused", max_artifact_bytes=1 << 20)


async def install(store: ReleaseStore, wheel: Path, version: str, sha256: str | None = None, **kw):
    return await install_release(
        store,
        version=version,
        artifact=str(wheel),
        sha256=sha256 or sha256_of(wheel),
        python=kw.pop("python", PIP),
        cfg=CFG,
        now=kw.pop("now", 1000.0),
        **kw,
    )


def left_in(store: ReleaseStore) -> list[str]:
    return sorted(p.name for p in store.dir.iterdir())


async def test_a_verified_wheel_is_installed_as_its_version_with_its_release_file(tmp_path) -> None:
    wheel = build_wheel(tmp_path / "dist", "1.2.0")
    store = ReleaseStore(tmp_path / "releases", "agent")
    done = await install(store, wheel, "1.2.0", now=1234.5)
    assert done.fresh and done.path == str(tmp_path / "releases" / "agent" / "1.2.0")
    assert (Path(done.path) / "tinyrel" / "__init__.py").read_text() == "__version__ = '1.2.0'\n"
    assert (Path(done.path) / "tinyrel-1.2.0.dist-info" / "METADATA").is_file()
    release = json.loads((Path(done.path) / "release.json").read_text())
    assert release == {"version": "1.2.0", "sha256": sha256_of(wheel), "installed_at": 1234.5, "artifact": str(wheel)}
    assert left_in(store) == ["1.2.0"]  # no .partial, no download directory
    assert [i.version for i in store.installed()] == ["1.2.0"]


async def test_the_same_version_and_hash_again_is_a_no_op_and_another_hash_is_refused(tmp_path) -> None:
    wheel = build_wheel(tmp_path / "dist", "1.0")
    store = ReleaseStore(tmp_path / "releases", "agent")
    await install(store, wheel, "1.0")

    async def no_fetch(*args, **kwargs):
        raise AssertionError("an installed version must not be fetched again")

    again = await install(store, wheel, "1.0", fetch=no_fetch)
    assert not again.fresh and again.info.sha256 == sha256_of(wheel)
    other = build_wheel(tmp_path / "other", "1.0", files={"tinyrel/__init__.py": "changed = True\n"})
    with pytest.raises(ReleaseError) as caught:
        await install(store, other, "1.0")
    assert caught.value.field == "args.sha256"
    assert sha256_of(wheel) in caught.value.reason and "needs a new version" in caught.value.reason
    assert (store.path("1.0") / "tinyrel" / "__init__.py").read_text() == "__version__ = '1.0'\n"  # untouched


async def test_a_wrong_hash_installs_nothing_and_names_both_hashes(tmp_path) -> None:
    wheel = build_wheel(tmp_path / "dist", "2.0")
    store = ReleaseStore(tmp_path / "releases", "trainer")
    claimed = "0" * 64
    with pytest.raises(ReleaseError) as caught:
        await install(store, wheel, "2.0", sha256=claimed)
    assert caught.value.field == "args.sha256"
    assert sha256_of(wheel) in caught.value.reason and claimed in caught.value.reason
    assert left_in(store) == [] and store.installed() == []


async def test_a_failed_pip_leaves_no_half_version_and_a_stale_partial_is_never_a_version(tmp_path) -> None:
    wheel = build_wheel(tmp_path / "dist", "3.0")
    store = ReleaseStore(tmp_path / "releases", "agent")
    # a "pip" that writes part of the target, then fails
    half = (
        "import os,sys; t=sys.argv[sys.argv.index('--target')+1]; os.makedirs(t+'/tinyrel'); print('boom'); sys.exit(3)"
    )
    with pytest.raises(ReleaseError, match=r"pip install failed \(exit 3\): boom"):
        await install(store, wheel, "3.0", python=(sys.executable, "-c", half))
    assert left_in(store) == []

    (store.partial("3.0") / "tinyrel").mkdir(parents=True)  # what a crash mid-install leaves
    assert store.installed() == [] and store.info("3.0") is None
    assert (await install(store, wheel, "3.0")).fresh  # the next try starts afresh
    assert left_in(store) == ["3.0"]


async def test_an_install_cancelled_midway_kills_pip_and_removes_the_partial(tmp_path) -> None:
    wheel = build_wheel(tmp_path / "dist", "4.0")
    store = ReleaseStore(tmp_path / "releases", "agent")
    stuck = "import os,sys,time; t=sys.argv[sys.argv.index('--target')+1]; os.makedirs(t); time.sleep(600)"
    task = asyncio.create_task(install(store, wheel, "4.0", python=(sys.executable, "-c", stuck)))
    await wait_until(store.partial("4.0").exists, timeout=30, what="the fake pip's partial directory")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert left_in(store) == []


@pytest.mark.parametrize(
    ("version", "artifact", "field", "words"),
    [
        ("current", "/w/tinyrel-1-py3-none-any.whl", "args.version", "cannot name a version"),
        ("1.0.partial", "/w/tinyrel-1-py3-none-any.whl", "args.version", "cannot name a version"),
        ("1.1", "/w/tinyrel-1.0-py3-none-any.whl", "args.version", "is version 1.0, not 1.1"),
        ("1.0", "/w/tinyrel-1.0.tar.gz", "args.artifact", "not a wheel's file name"),
        ("1.0", "w/tinyrel-1.0-py3-none-any.whl", "args.artifact", "relative path"),
        ("1.0", "http://h/tinyrel-1.0-py3-none-any.whl", "args.artifact", "scheme 'http' is not fetched"),
        ("1.0", "file://otherhost/tinyrel-1.0-py3-none-any.whl", "args.artifact", "not on 'otherhost'"),
    ],
)
def test_upgrades_that_cannot_work_are_refused_before_any_download(tmp_path, version, artifact, field, words) -> None:
    with pytest.raises(ReleaseError) as caught:
        check_upgrade(ReleaseStore(tmp_path, "agent"), version, artifact, "a" * 64)
    assert caught.value.field == field and words in caught.value.reason
