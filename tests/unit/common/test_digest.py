"""The one SHA-256 loop: the digest and size of what was read, chunk by chunk, within a bound."""

from __future__ import annotations

import hashlib
import io

import pytest

from myolo.common.digest import Hashed, Sha256, TooLarge, sha256_file

DATA = bytes(range(256)) * 1000  # 256000 bytes


def test_a_file_hashes_to_hashlibs_digest_whatever_the_chunk(tmp_path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    expected = Hashed(hashlib.sha256(DATA).hexdigest(), len(DATA))
    for chunk in (1 << 20, 4096, 7):
        assert sha256_file(path, chunk=chunk) == expected
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert sha256_file(empty) == Hashed(hashlib.sha256(b"").hexdigest(), 0)


def test_each_chunk_is_handed_on_after_it_is_taken() -> None:
    copy = io.BytesIO()
    hashed = Sha256().read(io.BytesIO(DATA), chunk=10_000, each=copy.write)
    assert copy.getvalue() == DATA and hashed.size == len(DATA)


def test_the_bound_is_checked_before_a_chunk_that_passes_it_is_taken() -> None:
    assert Sha256(max_bytes=len(DATA)).read(io.BytesIO(DATA)).size == len(DATA)  # exactly the bound: fine
    digest = Sha256(max_bytes=len(DATA) - 1)
    seen: list[int] = []
    with pytest.raises(TooLarge) as exc:
        digest.read(io.BytesIO(DATA), chunk=100_000, each=lambda b: seen.append(len(b)))
    assert (exc.value.size, exc.value.limit) == (len(DATA), len(DATA) - 1)
    assert digest.size == 200_000 and seen == [100_000, 100_000]  # the third chunk was never taken


def test_fed_by_hand_as_a_download_arrives() -> None:
    digest = Sha256(max_bytes=10)
    digest.update(b"hello")
    digest.update(b"world")
    assert digest.result() == Hashed(hashlib.sha256(b"helloworld").hexdigest(), 10)
    with pytest.raises(TooLarge):
        digest.update(b"!")
    assert digest.result().size == 10


def test_a_read_error_leaves_the_size_read_before_it() -> None:
    class Failing(io.BytesIO):
        def read(self, n: int = -1) -> bytes:
            if self.tell() >= 3:
                raise OSError(5, "Input/output error")
            return super().read(n)

    digest = Sha256()
    with pytest.raises(OSError):
        digest.read(Failing(b"abcdef"), chunk=3)  # type: ignore[arg-type]
    assert digest.size == 3


@pytest.mark.parametrize(("kwargs", "words"), [({"max_bytes": -1}, "max_bytes")])
def test_bad_bounds_are_refused(kwargs, words) -> None:
    with pytest.raises(ValueError, match=words):
        Sha256(**kwargs)
    with pytest.raises(ValueError, match="chunk"):
        Sha256().read(io.BytesIO(b"x"), chunk=0)


def test_a_missing_file_raises_oserror(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        sha256_file(tmp_path / "absent")
