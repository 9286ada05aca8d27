"""The parallel layout as plain data: the (pp, dp, tp) degrees and the pipeline schedules a job may name.

Torch-free on purpose: job validation (``myolo.kernels.train.config``, ``python -m myolo.kernels.cli.check_job``) runs
in the node agent's checks before any worker starts, where importing torch would cost seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEDULES = ("1f1b", "interleaved1f1b")


@dataclass(frozen=True)
class Layout:
    pp: int = 1
    dp: int = 1
    tp: int = 1

    @property
    def world(self) -> int:
        return self.pp * self.dp * self.tp

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(pp_rank, dp_rank, tp_rank) of a global rank under the tp-fastest order."""
        return rank // (self.dp * self.tp), (rank // self.tp) % self.dp, rank % self.tp

    def __str__(self) -> str:
        return f"pp={self.pp} x dp={self.dp} x tp={self.tp}"
