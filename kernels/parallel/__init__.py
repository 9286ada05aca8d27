"""Mesh and parallel plans: TP+SP (DTensor), pipeline (torch.distributed.pipelining), FSDP2.

``Layout`` is plain data and imports eagerly; the torch-backed names load on first use, so job validation
can use the layout without importing torch. The ``parallelize`` function is imported from its module
(``myolo.kernels.parallel.parallelize``): here that name is the submodule, which a lazy attribute cannot shadow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from myolo.kernels.lazy import lazy_attributes
from myolo.kernels.parallel.layout import SCHEDULES, Layout

if TYPE_CHECKING:
    from myolo.kernels.parallel.mesh import MeshInfo, build_mesh, init_distributed
    from myolo.kernels.parallel.parallelize import ParallelModel

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
        "MeshInfo": "myolo.kernels.parallel.mesh",
        "build_mesh": "myolo.kernels.parallel.mesh",
        "init_distributed": "myolo.kernels.parallel.mesh",
        "ParallelModel": "myolo.kernels.parallel.parallelize",
    },
)
