"""Quantizing a registered model version: a one-replica job, then the quantized version registered as its child."""
