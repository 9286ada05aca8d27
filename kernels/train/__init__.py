"""Job configuration, the training step and loop, progress records."""

from myolo.kernels.train.config import JobConfig, JobConfigError

__all__ = ["JobConfig", "JobConfigError"]
