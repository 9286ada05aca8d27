"""Our own Triton kernels. Importing this package runs the `@triton.jit` decorators, so import it only
after deciding Triton is usable (CUDA, or TRITON_INTERPRET=1 set beforehand for CPU tests)."""

from myolo.kernels.ops.triton_kernels.cross_entropy import fused_cross_entropy
from myolo.kernels.ops.triton_kernels.rmsnorm import fused_residual_rms_norm

__all__ = ["fused_cross_entropy", "fused_residual_rms_norm"]
