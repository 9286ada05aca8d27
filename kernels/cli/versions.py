"""``python -m myolo.kernels.cli.versions``: the CUDA stack as the trainer's interpreter sees it, as one JSON line.

The agent runs it in the workers' interpreter and environment (it never imports torch itself), so pre-flight
compares what the workers will load (``torch.version.cuda``, cuDNN's version) with what the node's driver
supports. A CPU build of torch answers ``cuda: null``.
"""

from __future__ import annotations

import sys

import msgspec

from myolo.events.payloads.commands import RuntimeVersions


def cudnn_text(version: int | None) -> str | None:
    """cuDNN's integer version as major.minor.patch: 90100 -> 9.1.0 (cuDNN 9), 8902 -> 8.9.2 (cuDNN 8)."""
    if not version:
        return None
    if version >= 90000:
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return f"{version // 1000}.{version % 1000 // 100}.{version % 100}"


def read() -> RuntimeVersions:
    import torch

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return RuntimeVersions(
        torch=str(torch.__version__),
        cuda=torch.version.cuda,
        cudnn=cudnn_text(cudnn),
        gpus_visible=torch.cuda.device_count() if torch.version.cuda else 0,
    )


def main() -> None:
    sys.stdout.write(msgspec.json.encode(read()).decode() + "\n")


if __name__ == "__main__":
    main()
