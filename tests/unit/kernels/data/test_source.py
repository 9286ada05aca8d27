"""Deterministic token sources: the global batch depends on (seed, step) only; dp takes row slices."""

from __future__ import annotations

import array
from pathlib import Path

import pytest
import torch

from myolo.kernels.data import SyntheticTokens, TokenFile, local_rows, open_source


def test_synthetic_is_a_function_of_seed_and_step() -> None:
    a, b = SyntheticTokens(256, 8, 16, seed=1), SyntheticTokens(256, 8, 16, seed=1)
    xa, ya = a.global_batch(5)
    xb, yb = b.global_batch(5)
    assert torch.equal(xa, xb) and torch.equal(ya, yb)
    assert not torch.equal(xa, a.global_batch(6)[0])
    assert not torch.equal(xa, SyntheticTokens(256, 8, 16, seed=2).global_batch(5)[0])
    assert torch.equal(xa[:, 1:], ya[:, :-1])  # targets are inputs shifted by one
    assert int(xa.max()) < 256 and int(xa.min()) >= 0


def test_dp_slices_partition_the_global_batch() -> None:
    x, _ = SyntheticTokens(256, 8, 16, seed=0).global_batch(3)
    for dp in (1, 2, 4, 8):
        assert torch.equal(torch.cat([local_rows(x, r, dp) for r in range(dp)]), x)
    with pytest.raises(ValueError, match="not divisible by dp=3"):
        local_rows(x, 0, 3)


@pytest.mark.parametrize(("dtype", "code"), [("uint16", "H"), ("uint32", "I")])
def test_token_file_reads_windows_deterministically(tmp_path: Path, dtype: str, code: str) -> None:
    n = 10 * 9  # exactly 10 windows of seq_len 8 (+1)
    path = tmp_path / "tokens.bin"
    path.write_bytes(array.array(code, range(n)).tobytes())
    src = TokenFile(path, global_batch=4, seq_len=8, seed=0, dtype=dtype)
    x, y = src.global_batch(0)
    assert x.shape == y.shape == (4, 8)
    assert x.dtype == torch.int64
    # every row is one contiguous window of the file starting on a window boundary
    assert torch.equal(y[:, -1] - x[:, 0], torch.full((4,), 8))
    assert bool((x[:, 0] % 9 == 0).all())
    # one epoch (steps 0..1 plus half of 2) visits distinct windows
    starts = torch.cat([TokenFile(path, 4, 8, 0, dtype).global_batch(s)[0][:, 0] for s in (0, 1)])
    assert len(set(starts.tolist())) == 8
    assert torch.equal(src.global_batch(7)[0], TokenFile(path, 4, 8, 0, dtype).global_batch(7)[0])


def test_token_file_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"data\.path"):
        TokenFile(tmp_path / "missing.bin", 2, 4)
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"\x00" * 5)
    with pytest.raises(ValueError, match="not a whole number of uint16"):
        TokenFile(odd, 2, 4)
    big = tmp_path / "big.bin"
    big.write_bytes(array.array("H", [300] * 20).tobytes())
    with pytest.raises(ValueError, match="vocab_size 256"):
        open_source(str(big), 256, 2, 4, 0).global_batch(0)
