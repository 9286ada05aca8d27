"""Build and apply the checkpointed state with the distributed state-dict helpers.

Why ``get_state_dict``/``set_state_dict`` (torch.distributed.checkpoint.state_dict) and not
``module.state_dict()``: they return DTensor-keyed state with fully-qualified parameter names for FSDP2
and TP modules alike, and a *flattened* optimizer state keyed by those names (``state.<fqn>.exp_avg``).
That is what lets DCP reshard on load: the same names and global shapes whatever the dp/tp/pp layout that
wrote them, so a checkpoint from dp=2 x tp=2 loads into dp=1 x tp=2, and pipeline stages (which keep the
full model's FQNs) each load only the keys they own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import torch.nn as nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.optim import Optimizer

_OPTIM_OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True)
# Pipeline stages hold a subset of the model: each part loads the keys it has and ignores the rest.
_LOAD_OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True, strict=False)


class Stateful(Protocol):
    """Anything else to checkpoint (an LR scheduler, a data loader with its own position)."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...


def check_parts(model_parts: list[nn.Module], optimizers: list[Optimizer]) -> None:
    """One optimizer per model part, because the flattened optimizer state is looked up per part."""
    if not model_parts:
        raise ValueError("Checkpointer: model_parts is empty; pass the list of model modules (one per stage)")
    if len(model_parts) != len(optimizers):
        raise ValueError(
            f"Checkpointer: got {len(model_parts)} model parts but {len(optimizers)} optimizers; pass one "
            "optimizer per model part (in the same order), as each optimizer's state is keyed by its part"
        )


def collect_state(
    model_parts: list[nn.Module],
    optimizers: list[Optimizer],
    step: int,
    extra: Mapping[str, Stateful],
) -> dict[str, Any]:
    """The full state of this rank as a DCP-ready nested dict. Tensors alias the live parameters (DCP's
    async stager copies them before returning, so training may continue)."""
    model: dict[str, Any] = {}
    optim: dict[str, Any] = {}
    for part, opt in zip(model_parts, optimizers, strict=True):
        model.update(get_model_state_dict(part))
        optim.update(get_optimizer_state_dict(part, opt, options=_OPTIM_OPTIONS))
    state: dict[str, Any] = {"model": model, "optim": optim, "train": {"step": step}}
    for name, obj in extra.items():
        state[f"extra.{name}"] = obj.state_dict()
    return state


def apply_state(
    state: dict[str, Any],
    model_parts: list[nn.Module],
    optimizers: list[Optimizer],
    extra: Mapping[str, Stateful],
) -> int:
    """Load a state produced by ``collect_state`` (after ``dcp.load`` filled it); returns its step."""
    for part, opt in zip(model_parts, optimizers, strict=True):
        set_model_state_dict(part, state["model"], options=_LOAD_OPTIONS)
        set_optimizer_state_dict(part, opt, optim_state_dict=state["optim"], options=_LOAD_OPTIONS)
    for name, obj in extra.items():
        obj.load_state_dict(state[f"extra.{name}"])
    return int(state["train"]["step"])
