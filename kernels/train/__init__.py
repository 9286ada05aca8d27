"""Job configuration, the training step and loop, progress records."""

from kernels.train.config import JobConfig, JobConfigError

__all__ = ["JobConfig", "JobConfigError"]
