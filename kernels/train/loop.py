"""The training loop one worker process runs: set up mesh, model, optimizer, checkpoints; step; report.

Per step every rank joins one small all-reduce carrying the loss (only last-stage ranks contribute) and
the control flags (checkpoint now / stop after this step), so all ranks agree on both without extra
round trips, whichever rank the agent's message reached first.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from kernels import ops
from kernels.data import local_rows, open_source
from kernels.model import GPT, mfu
from kernels.model.flops import peak_flops
from kernels.parallel import MeshInfo, ParallelModel, build_mesh, init_distributed, parallelize
from kernels.parallel.mesh import pick_device
from kernels.train.config import JobConfig
from kernels.train.staleness import LocalSGD
from kernels.train.step import clip_global_norm, forward_backward, lm_loss

log = logging.getLogger(__name__)

Emit = Callable[[dict[str, Any]], None]


@dataclass
class Control:
    """What the supervisor asked for; ``poll`` returns (checkpoint_now, stop)."""

    poll: Callable[[], tuple[bool, bool]] = lambda: (False, False)
    progress: Callable[[dict[str, Any]], None] = lambda rec: None
    heartbeat: Callable[[int], object] = lambda step: None
    close: Callable[[], None] = lambda: None


@dataclass
class RunResult:
    records: list[dict[str, Any]] = field(default_factory=list)
    stopped_early: bool = False


def lr_lambda(job: JobConfig) -> Callable[[int], float]:
    """Linear warm-up, then cosine decay to ``min_lr_ratio`` of the peak at the last step."""

    def factor(i: int) -> float:
        if job.warmup_steps and i < job.warmup_steps:
            return (i + 1) / job.warmup_steps
        span = max(1, job.steps - job.warmup_steps)
        progress = min(1.0, (i - job.warmup_steps) / span)
        return job.min_lr_ratio + (1 - job.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


def _host_rss() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def setup(job: JobConfig) -> tuple[MeshInfo, torch.dtype]:
    device = pick_device(job.device, int(os.environ.get("LOCAL_RANK", "0")))
    rank, world = init_distributed(device)
    job.validate(world)
    info = build_mesh(job.layout(), device, rank, world)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    return info, dtype


def build_model(job: JobConfig, info: MeshInfo, dtype: torch.dtype, use_fsdp: bool) -> tuple[ParallelModel, int]:
    """The full model, identically seeded on every rank, cut and sharded into this rank's parts."""
    torch.manual_seed(job.seed)
    with torch.device(info.device):
        model = GPT(job.model_config())
    n_params = model.num_params()
    pm = parallelize(
        model,
        info,
        stages_per_rank=job.stages_per_rank,
        n_microbatches=job.n_microbatches(),
        schedule=job.schedule,
        loss_fn=lm_loss,
        use_fsdp=use_fsdp,
        param_dtype=dtype,
        compile_blocks=job.compile,
    )
    return pm, n_params


def injected_fault(rank: int) -> int | None:
    """``MYOLO_INJECT_FAULT="rank=R,step=S"`` makes rank R raise at step S: lets supervisors (myolo-train,
    the agent) be tested against a real worker failure."""
    spec = os.environ.get("MYOLO_INJECT_FAULT", "")
    if not spec:
        return None
    try:
        kv = dict(item.split("=", 1) for item in spec.split(","))
        return int(kv["step"]) if int(kv["rank"]) == rank else None
    except (ValueError, KeyError):
        raise ValueError(f"MYOLO_INJECT_FAULT={spec!r} must look like 'rank=R,step=S'") from None


def run(job: JobConfig, emit: Emit | None = None, control: Control | None = None) -> RunResult:
    """Train ``job`` on this process's share of the mesh; rank 0 passes records to ``emit``."""
    control = control or Control()
    info, dtype = setup(job)
    layout, device = info.layout, info.device
    cfg = job.model_config()
    chosen = ops.configure(prefer=job.ops_prefer or None, device=device.type, dtype=dtype)

    local_sgd = LocalSGD(job.sync_every, layout.dp, info.group("dp"))
    pm, n_params = build_model(job, info, dtype, use_fsdp=not local_sgd.enabled)
    n_mb = job.n_microbatches()
    autocast = dtype if (dtype != torch.float32 and not pm.fsdp) else None
    opts = [
        ops.make_adamw(list(p.parameters()), job.lr, (job.beta1, job.beta2), 1e-8, job.weight_decay) for p in pm.parts
    ]
    scheds = [torch.optim.lr_scheduler.LambdaLR(o, lr_lambda(job)) for o in opts]
    params = pm.parameters()

    ckpt = None
    start = 0
    if job.checkpoint_dir or job.snapshot_every:
        from kernels.checkpoint import Checkpointer

        extra = {f"lr_scheduler_{i}": s for i, s in enumerate(scheds)}
        ckpt = Checkpointer(
            job.checkpoint_dir,
            job.checkpoint_every,
            pm.parts,
            opts,
            snapshot_every=job.snapshot_every,
            extra=extra,
            job_id=job.job_id,
        )
        if job.resume:
            start = ckpt.load_latest() or 0

    source = open_source(job.data_path, cfg.vocab_size, job.global_batch, job.seq_len, job.seed, job.data_dtype)
    tokens_per_step = job.global_batch * job.seq_len
    peak = peak_flops(torch.cuda.get_device_name(device) if device.type == "cuda" else None)
    is_reporter = info.rank == 0
    replica_reporter = pm.has_last and info.tp_rank == 0
    result = RunResult()

    def out(rec: dict[str, Any]) -> None:
        result.records.append(rec)
        if emit is not None:
            emit(rec)

    if is_reporter:
        out(
            {
                "event": "start",
                "model": job.model,
                "params": n_params,
                "layout": str(layout),
                "device": str(device),
                "dtype": str(dtype).removeprefix("torch."),
                "global_batch": job.global_batch,
                "seq_len": job.seq_len,
                "microbatches": n_mb,
                "start_step": start + 1,
                "backends": dict(chosen or {}),  # resolved per op at start; steps report what ran
            }
        )
    world_group = dist.group.WORLD if info.mesh is not None else None
    loss_share = layout.dp * layout.tp  # ranks on the last stage, each holding its replica's loss
    last = {"loss": float("nan"), "tokens_per_s": 0.0}
    fault_step = injected_fault(info.rank)
    for step in range(start + 1, job.steps + 1):
        if step == fault_step:
            raise RuntimeError(f"injected fault (MYOLO_INJECT_FAULT) on rank {info.rank} at step {step}")
        t0 = time.perf_counter()
        inputs, targets = source.global_batch(step)
        inputs = local_rows(inputs, info.dp_rank, layout.dp).to(device, non_blocking=True)
        targets = local_rows(targets, info.dp_rank, layout.dp).to(device, non_blocking=True)
        loss = forward_backward(pm, inputs, targets, n_mb, autocast)
        gnorm = clip_global_norm(params, job.grad_clip, info.group("pp"))
        for o, s in zip(opts, scheds, strict=True):
            o.step()
            o.zero_grad(set_to_none=True)
            s.step()
        staleness = local_sgd.after_step(step, params)
        ckpt_now, stop = control.poll()
        replica_loss = float(loss) if loss is not None else 0.0
        agreed = torch.tensor(
            [replica_loss if pm.has_last else 0.0, float(ckpt_now), float(stop)],
            dtype=torch.float64,
            device=device,
        )
        if world_group is not None:
            dist.all_reduce(agreed, group=world_group)
        global_loss, ckpt_now, stop = float(agreed[0]) / loss_share, bool(agreed[1]), bool(agreed[2])
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        dt = time.perf_counter() - t0
        tps = tokens_per_step / dt
        rec = {
            "event": "step",
            "step": step,
            "steps": job.steps,
            "loss": global_loss,
            "tokens_per_s": tps,
            "step_time_s": dt,
            "grad_norm": gnorm,
            "lr": scheds[0].get_last_lr()[0],
            "mfu": mfu(cfg, job.seq_len, tps, peak, layout.world),
            "gradient_staleness": staleness,
            "backends": ops.selected_backends(),
        }
        if device.type == "cuda":
            rec["mem_allocated_bytes"] = torch.cuda.memory_allocated(device)
            rec["mem_reserved_bytes"] = torch.cuda.memory_reserved(device)
        rec["host_rss_bytes"] = _host_rss()
        control.heartbeat(step)
        if replica_reporter:
            control.progress({**rec, "loss": replica_loss, "rank": info.rank, "dp_rank": info.dp_rank})
        if is_reporter:
            out(rec)
        last = {"loss": global_loss, "tokens_per_s": tps}
        if ckpt is not None:
            ckpt.on_step(step, force=ckpt_now or stop)
        if stop:
            result.stopped_early = step < job.steps
            break
    if ckpt is not None:
        ckpt.close()
    if is_reporter:
        out({"event": "end", "steps": job.steps, **last, "stopped_early": result.stopped_early})
    control.close()
    return result


def shutdown() -> None:
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
