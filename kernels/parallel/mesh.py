"""One DeviceMesh over (pp, dp, tp), row-major so tp varies fastest and TP peers share a node.

rank = tp_rank + tp * (dp_rank + dp * pp_rank). Degree-1 dimensions are kept in the mesh (cheap) so
code can always ask for ``mesh["dp"]``; the plans skip them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from myolo.kernels.parallel.layout import Layout


@dataclass(frozen=True)
class MeshInfo:
    """Where this process sits; ``mesh`` is None for a plain single-process run."""

    layout: Layout
    rank: int
    device: torch.device
    mesh: DeviceMesh | None

    @property
    def pp_rank(self) -> int:
        return self.layout.coords(self.rank)[0]

    @property
    def dp_rank(self) -> int:
        return self.layout.coords(self.rank)[1]

    @property
    def tp_rank(self) -> int:
        return self.layout.coords(self.rank)[2]

    def group(self, dim: str) -> dist.ProcessGroup | None:
        if self.mesh is None or getattr(self.layout, dim) == 1:
            return None
        return self.mesh[dim].get_group()


def pick_device(requested: str = "auto", local_rank: int = 0) -> torch.device:
    """cuda:<local_rank> when a GPU is present (or asked for), else cpu."""
    if requested == "cpu" or (requested == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError("device='cuda' was requested but no CUDA device is available; use device='cpu'")
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def pin_nccl_algo(algo: str) -> None:
    """``ring`` or ``tree``: NCCL_ALGO for every communicator this process makes from now (NCCL reads it when a
    communicator is created); ``auto`` leaves NCCL's choice, or what the environment already says."""
    if algo != "auto":
        os.environ["NCCL_ALGO"] = {"ring": "Ring", "tree": "Tree"}[algo]


def init_distributed(device: torch.device, timeout_s: float = 300.0) -> tuple[int, int]:
    """Join the torchrun-style rendezvous (env://) with NCCL on GPU and gloo on CPU; (rank, world)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1 and "MASTER_ADDR" not in os.environ:
        return 0, 1
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
    return dist.get_rank(), dist.get_world_size()


def build_mesh(layout: Layout, device: torch.device, rank: int, world: int) -> MeshInfo:
    if layout.world != world:
        raise ValueError(f"layout {layout} needs {layout.world} processes but the world size is {world}")
    if world == 1 and not dist.is_initialized():
        return MeshInfo(layout, 0, device, None)
    mesh = init_device_mesh(device.type, (layout.pp, layout.dp, layout.tp), mesh_dim_names=("pp", "dp", "tp"))
    return MeshInfo(layout, rank, device, mesh)
