"""Mesh and parallel plans: TP+SP (DTensor), pipeline (torch.distributed.pipelining), FSDP2."""

from kernels.parallel.mesh import Layout, MeshInfo, build_mesh, init_distributed
from kernels.parallel.parallelize import ParallelModel, parallelize

__all__ = ["Layout", "MeshInfo", "ParallelModel", "build_mesh", "init_distributed", "parallelize"]
