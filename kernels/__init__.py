"""Myolotrain's training runtime: everything that imports torch lives under this package.

Sub-packages: ``model`` (GPT decoder, presets, FLOPs), ``data`` (deterministic token streams),
``parallel`` (DeviceMesh, TP/SP, pipeline, FSDP2), ``train`` (job config, step, loop, progress),
``cli`` (``myolo-train`` launcher and worker entry), ``ops`` (fused-op registry), ``checkpoint`` and
``worker`` (agent link). Importing this package does not import torch, so tooling can import names cheaply.
"""
