"""Mesh and parallel plans: TP+SP (DTensor), pipeline (torch.distributed.pipelining), FSDP2.

``Layout`` is plain data and imports eagerly; the torch-backed names load on first use, so job validation
can use the layout without importing torch. The ``parallelize`` function is imported from its module
(``kernels.parallel.parallelize``): here that name is the submodule, which a lazy attribute cannot shadow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernels.lazy import lazy_attributes
from kernels.parallel.layout import SCHEDULES, Layout

if TYPE_CHECKING:
    from kernels.parallel.mesh import MeshInfo, build_mesh, init_distributed
    from kernels.parallel.parallelize import ParallelModel

__all__ = [
    "SCHEDULES",
    "Layout",
    "MeshInfo",
    "ParallelModel",
    "build_mesh",
    "init_distributed",
]

__getattr__ = lazy_attributes(
    __name__,
    {
        "MeshInfo": "kernels.parallel.mesh",
        "build_mesh": "kernels.parallel.mesh",
        "init_distributed": "kernels.parallel.mesh",
        "ParallelModel": "kernels.parallel.parallelize",
    },
)
