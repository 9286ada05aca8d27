"""Deterministic token sources: the global batch of step ``s`` depends only on (seed, s).

That is the contract that makes resizing safe: any data-parallel layout takes contiguous row slices of
the same global batch, and the position to resume from is just the step number.
"""

from myolo.kernels.data.source import TokenSource, local_rows, open_source
from myolo.kernels.data.synthetic import SyntheticTokens
from myolo.kernels.data.tokenfile import TokenFile

__all__ = ["SyntheticTokens", "TokenFile", "TokenSource", "local_rows", "open_source"]
