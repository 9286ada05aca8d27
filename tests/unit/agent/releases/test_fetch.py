"""Fetching a wheel: a local path or file:// URL copied, an https URL downloaded, hashed as written, bounded."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from myolo.agent.releases import ReleaseError
from myolo.agent.releases.fetch import check_local, fetch_artifact
from tests.support.agent.wheels import build_wheel, sha256_of
from tests.support.tls_certs import make_certs

MiB = 1 << 20


@pytest.fixture
async def https(tmp_path) -> AsyncIterator[tuple[str, ssl.SSLContext, Path]]:
    """A local https server of ``tmp_path/www`` (a throwaway CA): its base URL, a client context trusting it."""
    www = tmp_path / "www"
    www.mkdir()
    certs = make_certs(tmp_path / "certs")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(certs.cert, certs.key)
    app = web.Application()
    app.router.add_static("/", www)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"https://localhost:{port}", ssl.create_default_context(cafile=str(certs.ca)), www
    finally:
        await runner.cleanup()


async def test_a_local_path_and_a_file_url_are_copied_and_hashed(tmp_path) -> None:
    wheel = build_wheel(tmp_path / "dist", "1.0")
    for i, artifact in enumerate([str(wheel), wheel.as_uri()]):
        dest = tmp_path / f"d{i}"
        dest.mkdir()
        got = await fetch_artifact(artifact, dest, max_bytes=MiB, timeout_s=10)
        assert got.path == dest / wheel.name and got.path.read_bytes() == wheel.read_bytes()
        assert (got.sha256, got.size) == (sha256_of(wheel), wheel.stat().st_size)


async def test_an_https_url_is_downloaded_and_hashed(tmp_path, https) -> None:
    base, ctx, www = https
    wheel = build_wheel(www, "2.0")
    got = await fetch_artifact(f"{base}/{wheel.name}", tmp_path, max_bytes=MiB, timeout_s=30, ssl=ctx)
    assert got.sha256 == sha256_of(wheel) and got.path.read_bytes() == wheel.read_bytes()


async def test_an_https_download_is_refused_past_the_size_bound_or_when_missing(tmp_path, https) -> None:
    base, ctx, www = https
    big = build_wheel(www, "3.0", files={"tinyrel/blob.py": "x" * (2 * MiB)})
    with pytest.raises(ReleaseError, match=r"larger than releases.max_artifact_bytes") as caught:
        await fetch_artifact(f"{base}/{big.name}", tmp_path, max_bytes=MiB, timeout_s=30, ssl=ctx)
    assert caught.value.field == "args.artifact"
    with pytest.raises(ReleaseError, match=r"answered HTTP 404"):
        await fetch_artifact(f"{base}/tinyrel-9-py3-none-any.whl", tmp_path, max_bytes=MiB, timeout_s=30, ssl=ctx)
    with pytest.raises(ReleaseError, match=r"cannot download .*SSL"):  # an untrusted certificate
        await fetch_artifact(f"{base}/{big.name}", tmp_path, max_bytes=MiB, timeout_s=30)


async def test_a_local_file_past_the_bound_or_absent_is_refused(tmp_path) -> None:
    big = build_wheel(tmp_path / "dist", "4.0", files={"tinyrel/blob.py": "x" * (2 * MiB)})
    with pytest.raises(ReleaseError, match=r"larger than releases.max_artifact_bytes \(\d+ > 1048576 bytes\)"):
        await fetch_artifact(str(big), tmp_path, max_bytes=MiB, timeout_s=10)
    with pytest.raises(ReleaseError, match="no such file on this node"):
        check_local(str(tmp_path / "tinyrel-5-py3-none-any.whl"))
    check_local("https://example.invalid/tinyrel-5-py3-none-any.whl")  # tried when the command runs
