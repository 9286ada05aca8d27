"""``myolo-train`` (standalone launcher) and the worker entry point (``python -m kernels.cli.worker``)."""
