"""Job configuration, the training step and loop, progress records."""

from kernels.train.config import ConfigError, JobConfig

__all__ = ["ConfigError", "JobConfig"]
