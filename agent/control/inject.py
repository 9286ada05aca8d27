"""Turn an :class:`InjectRequest` into calls on the simulated backend.

Only the simulator takes injected faults: on a real node the request is refused with the reason, so a typo
in a runbook never pretends to have broken a real GPU.
"""

from __future__ import annotations

from myolo.agent.control.protocol import InjectRequest, Reply
from myolo.agent.gpu.sim import SimBackend
from myolo.agent.gpu.sim_faults import parse_leak_rate


def apply(backend: object, req: InjectRequest) -> Reply:
    """Apply exactly one action; ``ValueError`` (caught by the server) for anything wrong."""
    if not isinstance(backend, SimBackend):
        raise ValueError(
            "fault injection needs simulated GPUs: start the agent with --simulate-gpus N (or simulate_gpus in "
            "its config); this agent reads real GPUs through NVML"
        )
    actions = req.actions()
    if len(actions) != 1:
        raise ValueError(
            "give exactly one of --xid, --ecc-dbe, --leak-rate, --throttle, --util, --clear "
            f"(got {', '.join('--' + a.replace('_', '-') for a in actions) or 'none'})"
        )
    what = actions[0]
    gpu = req.gpu
    if what == "xid":
        backend.inject_xid(gpu, req.xid)  # type: ignore[arg-type]
        done = f"XID {req.xid} on GPU {gpu}"
    elif what == "ecc_dbe":
        backend.inject_ecc_dbe(gpu)  # type: ignore[arg-type]
        done = f"double-bit ECC error on GPU {gpu}"
    elif what == "leak_rate":
        rate = parse_leak_rate(req.leak_rate)  # type: ignore[arg-type]
        backend.set_leak_rate(gpu, rate)
        done = f"memory leak of {rate:g}%/h on {_which(gpu)}"
    elif what == "throttle":
        backend.set_throttle(gpu, req.throttle)
        done = f"{req.throttle} throttling on {_which(gpu)}"
    elif what == "util":
        backend.set_util(gpu, req.util)
        done = f"utilisation held at {req.util:g}% on {_which(gpu)}"
    else:
        backend.clear(gpu)
        done = f"faults cleared on {_which(gpu)}"
    faults = {str(i): backend.faults(i).active() for i in range(backend.count)}
    return Reply(ok=True, message=f"injected: {done}" if what != "clear" else done, data={"faults": faults})


def _which(gpu: int | None) -> str:
    return "all GPUs" if gpu is None else f"GPU {gpu}"
