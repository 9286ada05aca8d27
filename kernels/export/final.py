"""The end of a run that trained all its steps with ``export_path`` set: every rank's part, collective.

Order, and why:

1. the final step is checkpointed (the loop forces the save on its last step; a run resumed at its last step
   saves here, unless that step is on disk already) and every rank waits until its share is on disk
   (``Checkpointer.close``);
2. all ranks agree that the save succeeded everywhere (one all-reduce): a shard missing on one rank would make
   rank 0's consolidation fail later with a less telling error;
3. rank 0 alone consolidates, writes and evaluates the export (``pipeline.export_checkpoint``); the others
   wait for its verdict on a gloo group of their own, with a timeout sized for an export rather than for a
   training collective, heartbeating meanwhile so the agent does not take the wait for a hang;
4. if rank 0's export failed, every rank raises: the job fails as a whole instead of a peer hanging in the
   shutdown barrier or the agent reporting a completion without its export.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
import torch
import torch.distributed as dist

from myolo.events.payloads.models import ModelExport, Watermark
from myolo.kernels.checkpoint.layout import METADATA, SAVE_PREFIX, dir_name
from myolo.kernels.export.pipeline import ExportSpec, export_checkpoint
from myolo.kernels.train.config import JobConfig

if TYPE_CHECKING:
    from myolo.kernels.checkpoint import Checkpointer

log = structlog.get_logger("myolo.kernels.export")
EXPORT_TIMEOUT = timedelta(hours=4)  # consolidating, hashing and evaluating a large model from slow storage
POLL_S = 0.5


class ExportFailed(RuntimeError):
    """The final save or rank 0's export failed; raised on every rank so the whole job fails."""


def spec_of(job: JobConfig, device: torch.device, watermark: Watermark | None = None) -> ExportSpec:
    return ExportSpec(
        model=job.model.name,
        model_args=dict(job.model.args),
        seq_len=job.data.seq_len,
        eval_data=job.data.eval_path,
        eval_batches=job.data.eval_batches,
        eval_rows=job.data.global_batch,
        data_dtype=job.data.dtype,
        data_path=job.data.path,
        init_from=job.checkpoint.init_from,
        device=str(device),
        watermark=watermark,
    )


def _agree(ok: bool, group: dist.ProcessGroup | None, wait: Callable[[], None]) -> bool:
    """True when ``ok`` on every rank; ``wait`` runs while the others have not answered yet."""
    if group is None:
        return ok
    flag = torch.tensor([1.0 if ok else 0.0])
    work = dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=group, async_op=True)
    while not work.is_completed():
        wait()
        time.sleep(POLL_S)
    work.wait()
    return bool(flag.item() == 1.0)


def export_after_training(
    job: JobConfig,
    checkpointer: Checkpointer,
    *,
    rank: int,
    distributed: bool,
    device: torch.device,
    heartbeat: Callable[[int], object],
    save_final: bool,
    watermark: Watermark | None = None,
) -> ModelExport | None:
    """Steps 1-4 above; the export on rank 0, None on the others. ``save_final``: the loop did not save the
    last step itself (the run resumed at it). Collective: every rank calls it, after the loop."""
    assert job.checkpoint.export_path is not None and job.checkpoint.dir is not None, "JobConfig.validate requires both"
    step = job.optimizer.steps
    beat = lambda: heartbeat(step)  # noqa: E731
    # Collective creation, at the same point on every rank (as the Checkpointer's own group).
    group = dist.new_group(backend="gloo", timeout=EXPORT_TIMEOUT) if distributed else None
    final = Path(job.checkpoint.dir) / dir_name(SAVE_PREFIX, step)
    # Resumed at the last step: save it unless it is on disk already (never rewrite the checkpoint the marker
    # names in place; a crash halfway would leave none). Agreed, as the save is collective.
    on_disk = save_final and _agree((final / METADATA).is_file(), group, beat)
    if save_final and not on_disk:
        checkpointer.maybe_save(step, force=True)
    checkpointer.close()
    saved = on_disk or step in checkpointer.completed_saves
    if not _agree(saved, group, beat):
        raise ExportFailed(
            f"the final checkpoint of step {step} was not saved on every rank "
            f"(this rank: {checkpointer.failed_saves or 'saved'}); nothing was exported"
        )
    export: ModelExport | None = None
    error: BaseException | None = None
    if rank == 0:
        try:
            export = export_checkpoint(
                final, job.checkpoint.export_path, spec_of(job, device, watermark), expect_step=step, on_progress=beat
            )
        except Exception as exc:  # every rank must hear of it (below) before this one raises
            error = exc
    if not _agree(error is None, group, beat):
        if error is not None:
            raise error
        raise ExportFailed(f"rank 0 failed to export the model to {job.checkpoint.export_path} (its log has the cause)")
    return export
