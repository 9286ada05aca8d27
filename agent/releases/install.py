"""Installing a verified wheel as a new version directory, never half-way and never unverified.

Order: a version already installed with the same SHA-256 is a no-op (a resent upgrade); with another hash it
is refused. Otherwise the wheel is fetched (``fetch.py``), its SHA-256 compared with the command's (a mismatch
installs nothing and names both), then ``pip install --no-deps --no-index --target <version>.partial`` (no
network: the dependencies are the venv's), ``release.json`` written into it, and the directory renamed to
``<version>``: a crash or a failure before the rename leaves no version, and the next try starts afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import msgspec
import structlog

from myolo.agent.releases.config import ReleasesConfig
from myolo.agent.releases.errors import ReleaseError
from myolo.agent.releases.fetch import Fetched, fetch_artifact, wheel_name, wheel_version
from myolo.agent.releases.store import RELEASE_FILE, ReleaseInfo, ReleaseStore

log = structlog.get_logger("myolo.agent.releases")
Fetch = Callable[..., Awaitable[Fetched]]  # fetch_artifact's signature
PIP_FLAGS = ("--isolated", "--no-deps", "--no-index", "--no-cache-dir", "--disable-pip-version-check", "--no-input")


class Installed(msgspec.Struct, kw_only=True):
    info: ReleaseInfo
    path: str
    fresh: bool  # False: it was installed already (same hash), nothing was fetched


def check_upgrade(store: ReleaseStore, version: str, artifact: str, sha256: str) -> ReleaseInfo | None:
    """The checks that need no download (run again when the command is admitted): the version's name, the
    hash of one already installed, and the wheel's name and version. Returns the installed release, if any."""
    existing = store.check_new(version, sha256)
    if existing is not None:
        return existing
    name = wheel_name(artifact)
    if wheel_version(name).lower() != version.replace("-", "_").lower():
        raise ReleaseError(
            f"the wheel {name} is version {wheel_version(name)}, not {version}: the node would report the wheel's "
            "version; send the wheel's own version",
            "args.version",
        )
    return None


async def install_release(
    store: ReleaseStore,
    *,
    version: str,
    artifact: str,
    sha256: str,
    python: Sequence[str],
    cfg: ReleasesConfig,
    now: float,
    fetch: Fetch = fetch_artifact,
) -> Installed:
    """Install ``version`` of ``store``'s component from ``artifact``, verified against ``sha256``."""
    existing = check_upgrade(store, version, artifact, sha256)
    if existing is not None:
        return Installed(info=existing, path=str(store.path(version)), fresh=False)
    store.dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".fetch-", dir=store.dir))
    try:
        fetched = await fetch(artifact, work, max_bytes=cfg.max_artifact_bytes, timeout_s=cfg.fetch_timeout_s)
        if fetched.sha256 != sha256:
            raise ReleaseError(
                f"the artifact's SHA-256 is {fetched.sha256}, but args.sha256 is {sha256}: not installed (a "
                "corrupted or substituted download, or the wrong hash); check the artifact and send its hash",
                "args.sha256",
            )
        info = ReleaseInfo(version=version, sha256=sha256, installed_at=now, artifact=artifact)
        await _install(python, fetched.path, store, info, cfg.install_timeout_s)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("release installed", component=store.component, version=version, sha256=sha256, bytes=fetched.size)
    return Installed(info=info, path=str(store.path(version)), fresh=True)


async def _install(
    python: Sequence[str], wheel: Path, store: ReleaseStore, info: ReleaseInfo, timeout_s: float
) -> None:
    partial = store.partial(info.version)
    shutil.rmtree(partial, ignore_errors=True)  # an earlier try cut short
    try:
        await pip_install(python, wheel, partial, timeout_s)
        (partial / RELEASE_FILE).write_bytes(msgspec.json.encode(info))
        partial.rename(store.path(info.version))
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


async def pip_install(python: Sequence[str], wheel: Path, target: Path, timeout_s: float) -> None:
    """``<python> -m pip install --no-deps --no-index --target <target> <wheel>``; raises naming pip's last
    words. Killed (and the caller cleans up) when cancelled or past ``timeout_s``."""
    argv = [*python, "-m", "pip", "install", *PIP_FLAGS, "--target", str(target), str(wheel)]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
    except OSError as exc:
        raise ReleaseError(f"cannot run {argv[0]}: {exc}") from None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        if isinstance(exc, TimeoutError):
            raise ReleaseError(
                f"pip did not install the wheel within releases.install_timeout_s ({timeout_s:g} s)"
            ) from None
        raise
    if proc.returncode != 0:
        tail = " | ".join(out.decode(errors="replace").strip().splitlines()[-3:]) or "no output"
        raise ReleaseError(f"pip install failed (exit {proc.returncode}): {tail[:800]}")
