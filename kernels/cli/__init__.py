"""``myolo-train`` (standalone launcher) and the worker entry point (``python -m myolo.kernels.cli.worker``)."""
