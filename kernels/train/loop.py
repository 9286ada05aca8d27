"""The training loop one worker process runs: prepare the session, step, report.

Per step every rank joins one small all-reduce carrying the loss (only last-stage ranks contribute) and
the control flags (checkpoint now / stop after this step), so all ranks agree on both without extra
round trips, whichever rank the agent's message reached first.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import msgspec
import torch
import torch.distributed as dist

from myolo.events.payloads import ModelExport, TrainingProgress
from myolo.kernels import ops
from myolo.kernels.data import local_rows
from myolo.kernels.export.final import export_after_training
from myolo.kernels.model import mfu
from myolo.kernels.train.comm import allreduce_busbw_gbps
from myolo.kernels.train.config import JobConfig
from myolo.kernels.train.guards import add_watermark_gradient
from myolo.kernels.train.records import EndRecord, Record, StartRecord, StepRecord, progress_payload
from myolo.kernels.train.session import Session, prepare
from myolo.kernels.train.step import clip_global_norm, forward_backward

Emit = Callable[[Record], None]


class Heartbeat(Protocol):
    """``AgentLink.heartbeat``'s shape: rate-limited unless ``force``; ``step`` is the last finished step."""

    def __call__(self, step: int, force: bool = False) -> object: ...


@dataclass
class Control:
    """What the supervisor asked for; ``poll`` returns (checkpoint_now, stop)."""

    poll: Callable[[], tuple[bool, bool]] = lambda: (False, False)
    progress: Callable[[TrainingProgress], None] = lambda payload: None
    heartbeat: Heartbeat = lambda step, force=False: None
    close: Callable[[], None] = lambda: None


@dataclass
class RunResult:
    records: list[Record] = field(default_factory=list)
    stopped_early: bool = False
    export: ModelExport | None = None  # on rank 0, when the job exported its final weights


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


def _host_rss() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def start_record(s: Session) -> StartRecord:
    job = s.job
    return StartRecord(
        model=job.model.name,
        params=s.n_params,
        layout=str(s.info.layout),
        device=str(s.info.device),
        dtype=str(s.dtype).removeprefix("torch."),
        global_batch=job.data.global_batch,
        seq_len=job.data.seq_len,
        microbatches=job.n_microbatches(),
        start_step=s.start + 1,
        backends=s.backends,
    )


def train_step(s: Session, step: int) -> tuple[float, float, int]:
    """Forward, backward and optimizer step on this replica's rows of the step's global batch.

    Returns (this replica's loss, 0.0 off the last stage; global gradient norm; gradient staleness)."""
    layout, device = s.info.layout, s.info.device
    inputs, targets = s.source.global_batch(step)
    inputs = local_rows(inputs, s.info.dp_rank, layout.dp).to(device, non_blocking=True)
    targets = local_rows(targets, s.info.dp_rank, layout.dp).to(device, non_blocking=True)
    loss = forward_backward(s.pm, inputs, targets, s.job.n_microbatches(), s.autocast)
    if s.defense is not None and s.job.defense.exchange == "update":
        if s.watermark is not None:
            add_watermark_gradient(s.watermark, s.pm, s.info, s.cfg)
        grad_norm = clip_global_norm(s.params, s.job.optimizer.grad_clip, s.info.group("pp"))
        s.defense.exchange_update(step, lambda: optimizer_step(s))
    else:
        if s.defense is not None:
            s.defense.exchange(step)
        if s.watermark is not None:  # after the exchange: the mark's gradient holds no data, need not be hidden
            add_watermark_gradient(s.watermark, s.pm, s.info, s.cfg)
        grad_norm = clip_global_norm(s.params, s.job.optimizer.grad_clip, s.info.group("pp"))
        optimizer_step(s)
        for opt in s.optimizers:
            opt.zero_grad(set_to_none=True)
    staleness = s.local_sgd.after_step(step, s.params)
    return (float(loss) if loss is not None else 0.0), grad_norm, staleness


def optimizer_step(s: Session) -> None:
    """Every optimizer's step and its learning-rate schedule's."""
    for opt, sched in zip(s.optimizers, s.schedulers, strict=True):
        opt.step()
        sched.step()


def agree(s: Session, replica_loss: float, checkpoint_now: bool, stop: bool) -> tuple[float, bool, bool]:
    """(mean loss over replicas, checkpoint now, stop), the same on every rank: one all-reduce."""
    layout = s.info.layout
    agreed = torch.tensor(
        [replica_loss if s.pm.has_last else 0.0, float(checkpoint_now), float(stop)],
        dtype=torch.float64,
        device=s.info.device,
    )
    if s.world_group is not None:
        dist.all_reduce(agreed, group=s.world_group)
    loss_share = layout.dp * layout.tp  # ranks on the last stage, each holding its replica's loss
    return float(agreed[0]) / loss_share, bool(agreed[1]), bool(agreed[2])


def step_record(s: Session, step: int, loss: float, step_time_s: float, grad_norm: float, staleness: int) -> StepRecord:
    job, device = s.job, s.info.device
    tokens_per_s = job.data.global_batch * job.data.seq_len / step_time_s
    on_cuda = device.type == "cuda"
    return StepRecord(
        step=step,
        steps=job.optimizer.steps,
        loss=loss,
        tokens_per_s=tokens_per_s,
        step_time_s=step_time_s,
        grad_norm=grad_norm,
        lr=s.schedulers[0].get_last_lr()[0],
        mfu=mfu(s.cfg, job.data.seq_len, tokens_per_s, s.peak_flops, s.info.layout.world),
        gradient_staleness=staleness,
        backends=ops.selected_backends(),
        host_rss_bytes=_host_rss(),
        mem_allocated_bytes=torch.cuda.memory_allocated(device) if on_cuda else None,
        mem_reserved_bytes=torch.cuda.memory_reserved(device) if on_cuda else None,
        exchange_bytes=s.defense.stats.last_bytes if s.defense is not None else None,
    )


def report(s: Session, rec: StepRecord, replica_loss: float, control: Control, out: Emit) -> None:
    """Heartbeat from every rank; progress from each replica's reporter; the run's record from rank 0."""
    control.heartbeat(rec.step)
    if s.replica_reporter:
        info = s.info
        payload = progress_payload(
            rec,
            job_id=s.job.job_id,
            rank=info.rank,
            world_size=info.layout.world,
            dp_rank=info.dp_rank,
            replica_loss=replica_loss,
        )
        control.progress(payload)
    if s.is_reporter:
        out(rec)


def run(job: JobConfig, emit: Emit | None = None, control: Control | None = None) -> RunResult:
    """Train ``job`` on this process's share of the mesh; rank 0 passes records to ``emit``."""
    control = control or Control()
    s = prepare(job)
    # Start-up is over (model built, rendezvous joined, checkpoint loaded): say so at once, with the last
    # finished step, so the agent can tell a slow start from a hang before the first (often slowest) step.
    control.heartbeat(s.start, force=True)
    result = RunResult()

    def out(rec: Record) -> None:
        result.records.append(rec)
        if emit is not None:
            emit(rec)

    if s.is_reporter:
        out(start_record(s))
    last_loss, last_tokens_per_s = float("nan"), 0.0
    fault_step = injected_fault(s.info.rank)
    exporting = job.checkpoint.export_path is not None and s.checkpointer is not None
    stopped = False
    for step in range(s.start + 1, job.optimizer.steps + 1):
        if step == fault_step:
            raise RuntimeError(f"injected fault (MYOLO_INJECT_FAULT) on rank {s.info.rank} at step {step}")
        t0 = time.perf_counter()
        replica_loss, grad_norm, staleness = train_step(s, step)
        checkpoint_now, stop = control.poll()
        loss, checkpoint_now, stop = agree(s, replica_loss, checkpoint_now, stop)
        if s.info.device.type == "cuda":
            torch.cuda.synchronize(s.info.device)
        rec = step_record(s, step, loss, time.perf_counter() - t0, grad_norm, staleness)
        if step == s.start + 1:  # once per run (a generation): the job's own all-reduce, after its first step
            rec = msgspec.structs.replace(rec, allreduce_busbw_gbps=allreduce_busbw_gbps(s.info.device, s.world_group))
        report(s, rec, replica_loss, control, out)
        last_loss, last_tokens_per_s = rec.loss, rec.tokens_per_s
        if s.checkpointer is not None:
            # The export is consolidated from the last step's checkpoint: save it whatever checkpoint_every says.
            s.checkpointer.on_step(step, force=checkpoint_now or stop or (exporting and step == job.optimizer.steps))
        if stop:
            stopped = True
            result.stopped_early = step < job.optimizer.steps
            break
    if exporting and not stopped and s.checkpointer is not None:
        # Not after a stop, even on the last step: the agent is waiting for the workers to leave (a drain); the
        # run resumed elsewhere at its last step exports there.
        result.export = export_after_training(
            job,
            s.checkpointer,
            rank=s.info.rank,
            distributed=s.world_group is not None,
            device=s.info.device,
            heartbeat=control.heartbeat,
            save_final=s.start >= job.optimizer.steps,
            watermark=s.watermark.record() if s.watermark is not None else None,
        )
    if s.checkpointer is not None:
        s.checkpointer.close()
    if s.is_reporter:
        out(
            EndRecord(
                steps=job.optimizer.steps,
                loss=last_loss,
                tokens_per_s=last_tokens_per_s,
                stopped_early=result.stopped_early,
            )
        )
    control.close()
    return result


def shutdown() -> None:
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
