"""Fetching a release's wheel to a local file, hashing it on the way, within a size bound.

An artifact is a local path, a ``file://`` URL or an ``https://`` URL of a wheel (``*.whl``: pip needs the
wheel's own file name). What gets installed is the copy made here, hashed as it was written, so the file that
was verified is the file that is installed, whatever happens to the source meanwhile.
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

import msgspec

from myolo.agent.releases.errors import ReleaseError
from myolo.common.digest import Sha256, TooLarge

CHUNK = 1 << 16
FIELD = "args.artifact"


class Fetched(msgspec.Struct, kw_only=True):
    path: Path
    sha256: str
    size: int


def local_path(artifact: str) -> Path | None:
    """The file an artifact names on this node (a path or ``file://`` URL), None for an ``https://`` URL."""
    parts = urlsplit(artifact)
    if parts.scheme == "https":
        return None
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ReleaseError(f"a file:// URL names a file on this node, not on {parts.netloc!r}", FIELD)
        path = Path(unquote(parts.path))
    elif "://" in artifact:
        raise ReleaseError(
            f"scheme {parts.scheme!r} is not fetched: give a local path, a file:// or an https:// URL", FIELD
        )
    else:
        path = Path(artifact)
    if not path.is_absolute():
        raise ReleaseError(f"{artifact!r} is a relative path; give the wheel's absolute path on the node", FIELD)
    return path


def wheel_name(artifact: str) -> str:
    """The wheel's file name (the last part of the path or URL), refused when it is not a wheel's."""
    path = local_path(artifact)
    name = path.name if path is not None else PurePosixPath(unquote(urlsplit(artifact).path)).name
    parts = name.removesuffix(".whl").split("-")
    if not name.endswith(".whl") or len(parts) not in (5, 6) or not all(parts):
        raise ReleaseError(
            f"{name!r} is not a wheel's file name (<name>-<version>-<python>-<abi>-<platform>.whl); upgrades "
            "install wheels only",
            FIELD,
        )
    return name


def wheel_version(name: str) -> str:
    """The version in a wheel's file name (``myolotrain-4.0.1-py3-none-any.whl`` -> ``4.0.1``)."""
    return name.split("-")[1]


def check_local(artifact: str) -> None:
    """Before the command is taken: a local artifact must be a readable file (an https one is tried later)."""
    path = local_path(artifact)
    if path is not None and not path.is_file():
        raise ReleaseError(f"no such file on this node: {path}", FIELD)


async def fetch_artifact(
    artifact: str, dest_dir: Path, *, max_bytes: int, timeout_s: float, ssl: ssl_module.SSLContext | None = None
) -> Fetched:
    """Copy or download ``artifact`` to ``dest_dir/<wheel name>``; refused past ``max_bytes``. ``ssl``: the
    context for https (default: the system's trust store)."""
    dest = dest_dir / wheel_name(artifact)
    src = local_path(artifact)
    if src is not None:
        return await asyncio.to_thread(_copy, src, dest, max_bytes)
    try:
        return await asyncio.wait_for(_download(artifact, dest, max_bytes, ssl), timeout_s)
    except TimeoutError:
        raise ReleaseError(
            f"the download took longer than releases.fetch_timeout_s ({timeout_s:g} s); raise it or use a nearer "
            "artifact",
            FIELD,
        ) from None


def _too_big(size: int, max_bytes: int) -> ReleaseError:
    return ReleaseError(
        f"the artifact is larger than releases.max_artifact_bytes ({size} > {max_bytes} bytes); raise that "
        "setting if the wheel is right",
        FIELD,
    )


def _copy(src: Path, dest: Path, max_bytes: int) -> Fetched:
    try:
        with src.open("rb") as fin, dest.open("wb") as fout:
            hashed = Sha256(max_bytes).read(fin, chunk=CHUNK, each=fout.write)
    except TooLarge as exc:
        raise _too_big(exc.size, max_bytes) from None
    except OSError as exc:
        raise ReleaseError(f"cannot read {src}: {exc}", FIELD) from None
    return Fetched(path=dest, sha256=hashed.sha256, size=hashed.size)


async def _download(url: str, dest: Path, max_bytes: int, ssl: ssl_module.SSLContext | None) -> Fetched:
    import aiohttp  # only when an upgrade downloads

    digest = Sha256(max_bytes)
    try:
        async with aiohttp.ClientSession() as session, session.get(url, ssl=ssl if ssl is not None else True) as resp:
            if resp.status != 200:
                raise ReleaseError(f"GET {url} answered HTTP {resp.status} {resp.reason}", FIELD)
            if resp.content_length is not None and resp.content_length > max_bytes:
                raise _too_big(resp.content_length, max_bytes)
            with dest.open("wb") as out:
                async for chunk in resp.content.iter_chunked(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
    except TooLarge as exc:
        raise _too_big(exc.size, max_bytes) from None
    except aiohttp.ClientError as exc:
        raise ReleaseError(f"cannot download {url}: {type(exc).__name__}: {exc}", FIELD) from None
    hashed = digest.result()
    return Fetched(path=dest, sha256=hashed.sha256, size=hashed.size)
