"""The CUDA check: the CUDA and cuDNN the trainer's interpreter loads on a node, against the driver and the
release's requirements.

FAIL when the node could not say (the trainer's interpreter broken), when torch's CUDA needs a newer driver
major version than the node's driver supports, or when CUDA or cuDNN is older than ``min_cuda``/``min_cudnn``.
A newer CUDA minor than the driver's runs under CUDA's minor-version compatibility and PASSes with that said.
SKIP where there is nothing to match: a CPU build of torch, or simulated GPUs (whose driver is the simulator's).
"""

from __future__ import annotations

from myolo.coordinator.preflight.checks import version_tuple
from myolo.coordinator.preflight.records import CheckResult
from myolo.events.payloads.commands import RuntimeVersions


def value(found: RuntimeVersions) -> str:
    """What the node said (a simulated driver's versions say ``(sim)`` themselves)."""
    return (
        f"torch {found.torch or '?'}, CUDA {found.cuda or 'none'}, cuDNN {found.cudnn or 'none'}; "
        f"driver {found.driver or '?'} supports CUDA {found.driver_cuda or '?'}"
    )


def threshold(min_cuda: str | None, min_cudnn: str | None) -> str:
    wants = ["CUDA <= the driver's"]
    wants += [f"CUDA >= {min_cuda}"] if min_cuda else []
    wants += [f"cuDNN >= {min_cudnn}"] if min_cudnn else []
    return ", ".join(wants)


def judge(node_id: str, found: RuntimeVersions, min_cuda: str | None, min_cudnn: str | None) -> CheckResult:
    row = CheckResult(node_id=node_id, check="cuda", verdict="FAIL", threshold=threshold(min_cuda, min_cudnn))
    if found.error is not None:
        row.reason = f"the trainer's interpreter on {node_id} could not say: {found.error}"
        return row
    row.value = value(found)
    if found.cuda is None:
        row.verdict = "SKIP"
        row.reason = "torch is a CPU build here (torch.version.cuda is None): no CUDA to match with the driver"
        return row
    have, driver = version_tuple(found.cuda), version_tuple(found.driver_cuda or "")
    problems = []
    if min_cuda and have is not None and have < (version_tuple(min_cuda) or ()):
        problems.append(f"CUDA {found.cuda} is older than the {min_cuda} required: install a torch built for it")
    if min_cudnn:
        cudnn = version_tuple(found.cudnn or "")
        if cudnn is None or cudnn < (version_tuple(min_cudnn) or ()):
            problems.append(f"cuDNN {found.cudnn or 'none'} is older than the {min_cudnn} required")
    if found.simulated:
        row.verdict = "FAIL" if problems else "SKIP"
        row.reason = "; ".join(problems) or (
            f"simulated GPUs: the driver's CUDA {found.driver_cuda} is the simulator's, not one to match torch's"
        )
        return row
    if driver is None or have is None:
        problems.append("the driver reported no CUDA version (NVML) to match torch's against")
    elif have[:1] > driver[:1]:
        problems.append(
            f"torch's CUDA {found.cuda} needs a driver for CUDA {have[0]}.x; this driver supports {found.driver_cuda}: "
            f"upgrade the driver on {node_id} (or install a torch built for CUDA {driver[0]}.x)"
        )
    if problems:
        row.reason = "; ".join(problems)
        return row
    row.verdict = "PASS"
    newer_minor = driver is not None and have is not None and have[:2] > driver[:2]
    row.reason = f"CUDA {found.cuda} runs on the driver's CUDA {found.driver_cuda}" + (
        " under minor-version compatibility (PTX JIT of newer code may fail)" if newer_minor else ""
    )
    return row
