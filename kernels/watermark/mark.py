"""``DigitalWatermark``: a keyed white-box mark in the weights (Uchida et al. 2017), proven with a p-value.

Embedding adds a hinge regulariser to the task loss: every bit's projection ``z_i`` (``carrier.py``) is pushed
to the side its bit names, by at least ``margin`` (in units of the projection's spread over an unmarked model,
so quantization or pruning noise a few times smaller cannot flip it); bits already past the margin pull no
more, so the task pays only for what the mark needs. Verifying reads the signs back: ``k`` of ``T`` bits
matching has p-value P[Binomial(T, 1/2) >= k] under the null of an unmarked model (exact, ``carrier.py`` says
why), and the model is called marked when p < ``alpha``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from myolo.events.payloads.models import Watermark
from myolo.kernels.quantization.convert import dequantize_model
from myolo.kernels.quantization.linear import QuantLinear
from myolo.kernels.watermark import stats
from myolo.kernels.watermark.align import realign
from myolo.kernels.watermark.carrier import CarrierPlan, bit_sums, plan, projections
from myolo.kernels.watermark.secret import WatermarkKey

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class WatermarkSettings:
    """What the key does not decide. ``bits``: the mark's length; ``share``: of the feed-forward matrices that
    carry it; ``max_coords``: carrier weights at most; ``margin``: of each projection; ``strength``: the
    regulariser's weight against the task loss; ``alpha``: the p-value below which a model is called marked."""

    bits: int = 256
    share: float = 0.5
    max_coords: int = 1 << 22
    margin: float = 2.0
    strength: float = 1.0
    alpha: float = 1e-6

    def __post_init__(self) -> None:
        checks = [
            ("bits", 16 <= self.bits <= 4096, "in [16, 4096]"),
            ("share", 0 < self.share <= 1, "in (0, 1]"),
            ("max_coords", self.max_coords >= 64 * self.bits, f">= 64 x bits ({64 * self.bits})"),
            ("margin", 0 < self.margin <= 10, "in (0, 10]"),
            ("strength", self.strength > 0, "> 0"),
            ("alpha", 0 < self.alpha < 0.5, "in (0, 0.5)"),
        ]
        for name, ok, want in checks:
            if not ok:
                raise ValueError(f"watermark.{name} must be {want}, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class Verification:
    """What a check of one model found. ``marked``: p < alpha. ``realigned``: units each re-alignment moved."""

    bits: int
    matched: int
    ber: float
    p_value: float
    log10_p: float
    alpha: float
    threshold_bits: int  # the fewest matching bits that call a model marked
    marked: bool
    commitment: str
    realigned: dict[str, int] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return "marked" if self.marked else "not marked"


@dataclass(frozen=True)
class EmbedReport:
    """How an embedding went: steps run, the weakest bit's margin, bits at the margin, task loss first/last."""

    steps: int
    min_margin: float
    bits_at_margin: int
    bits: int
    task_loss_first: float
    task_loss_last: float


class DigitalWatermark:
    """A key and its settings; every secret part of the mark derives from the key (``secret.py``)."""

    def __init__(self, key: WatermarkKey, settings: WatermarkSettings | None = None) -> None:
        self.key = key
        self.settings = settings or WatermarkSettings()
        self.message = torch.from_numpy(key.bits("message", self.settings.bits)).bool()
        self._plans: dict[tuple[tuple[str, tuple[int, ...]], ...], CarrierPlan] = {}

    @classmethod
    def generate(cls, key: str | bytes | WatermarkKey, **settings: float) -> DigitalWatermark:
        """A watermark derived from ``key`` (``DigitalWatermark.generate(key="secret")``); any :class:`WatermarkSettings` by keyword."""
        wk = key if isinstance(key, WatermarkKey) else WatermarkKey.of(key)
        return cls(wk, replace(WatermarkSettings(), **settings))

    @classmethod
    def from_key_file(cls, path: str, **settings: float) -> DigitalWatermark:
        return cls.generate(WatermarkKey.from_file(path), **settings)

    def __repr__(self) -> str:
        return f"DigitalWatermark(commitment={self.commitment[:16]}..., bits={self.settings.bits})"

    @property
    def commitment(self) -> str:
        return self.key.commitment

    def record(self) -> Watermark:
        """What an export's manifest and the registry keep of this mark: the commitment and the settings."""
        s = self.settings
        return Watermark(
            commitment=self.commitment, bits=s.bits, share=s.share, max_coords=s.max_coords, margin=s.margin
        )

    @classmethod
    def for_record(cls, key: WatermarkKey, record: Watermark) -> DigitalWatermark:
        """The mark a record describes, read with ``key``; ``ValueError`` when the key is not the one it names."""
        if key.commitment != record.commitment:
            raise ValueError(
                f"the key is not the one that marked this model (its commitment is {key.commitment[:16]}..., "
                f"the model's {record.commitment[:16]}...)"
            )
        settings = WatermarkSettings(
            bits=record.bits, share=record.share, max_coords=record.max_coords, margin=record.margin
        )
        return cls(key, settings)

    def plan_for(self, model: nn.Module) -> CarrierPlan:
        shape = tuple(
            (name, tuple(m.weight.shape))
            for name, m in model.named_modules()
            if isinstance(m, nn.Linear) and ".feed_forward." in name
        )
        if shape not in self._plans:
            s = self.settings
            self._plans[shape] = plan(self.key, model, s.bits, s.share, s.max_coords)
        return self._plans[shape]

    def signed_projections(
        self, model: nn.Module, *, parts: list[nn.Module] | None = None, group: dist.ProcessGroup | None = None
    ) -> torch.Tensor:
        """Each bit's projection times its sign (+1 for a 1): positive where the bit reads right. ``model``
        fixes the carriers (a full model, or one of its shape on the meta device); ``parts`` (default: the
        model) hold the weights, and ``group`` adds up the sums of the stages that hold the others."""
        z, sq = bit_sums(parts if parts is not None else [model], self.plan_for(model))
        if group is not None:
            z, sq = _summed_over(z, group), _summed_over(sq, group)
        zi = projections(z, sq)
        return torch.where(self.message.to(zi.device), zi, -zi)

    def loss(
        self, model: nn.Module, *, parts: list[nn.Module] | None = None, group: dist.ProcessGroup | None = None
    ) -> torch.Tensor:
        """The embedding regulariser: mean hinge of every bit's signed projection below the margin, weighted
        by ``strength`` (add it to the task loss)."""
        margin = self.signed_projections(model, parts=parts, group=group)
        return self.settings.strength * F.relu(self.settings.margin - margin).mean()

    def apply(
        self,
        model: nn.Module,
        batches: Iterable[Batch],
        *,
        steps: int = 200,
        lr: float = 1e-4,
        weight_decay: float = 0.0,
        progress: Callable[[int, float, float], None] | None = None,
    ) -> EmbedReport:
        """Embed the mark into ``model`` in place: ``steps`` of AdamW on the task loss (next-token cross-entropy
        of ``batches``, the job's data) plus the regulariser. ``progress(step, task_loss, min_margin)``."""
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        device = next(model.parameters()).device
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
        model.train()
        first = last = math.nan
        feed: Iterator[Batch] = iter(batches)
        for step in range(1, steps + 1):
            try:
                inputs, targets = next(feed)
            except StopIteration:
                raise ValueError(f"the data ran out after {step - 1} of {steps} steps") from None
            logits = model(inputs.to(device))
            task = F.cross_entropy(logits.flatten(0, 1).float(), targets.to(device).flatten())
            loss = task + self.loss(model)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            last = float(task.detach())
            first = last if step == 1 else first
            if progress is not None:
                progress(step, last, float(self.signed_projections(model).detach().min()))
        model.eval()
        with torch.no_grad():
            margin = self.signed_projections(model)
        return EmbedReport(
            steps=steps,
            min_margin=float(margin.min()),
            bits_at_margin=int((margin >= self.settings.margin).sum()),
            bits=self.settings.bits,
            task_loss_first=first,
            task_loss_last=last,
        )

    @torch.no_grad()
    def verify(self, model: nn.Module, reference: dict[str, torch.Tensor] | None = None) -> Verification:
        """Read the mark of ``model`` (float or quantized; never changed). Given the owner's ``reference``
        weights, a copy is first re-aligned to them, undoing a neuron permutation."""
        realigned: dict[str, int] = {}
        quantized = any(isinstance(m, QuantLinear) for m in model.modules())
        if quantized or reference is not None:
            model = dequantize_model(copy.deepcopy(model))
            if reference is not None:
                realigned = realign(model, reference)
        matched = int((self.signed_projections(model) > 0).sum())
        s = self.settings
        p = stats.p_value(matched, s.bits)
        return Verification(
            bits=s.bits,
            matched=matched,
            ber=1.0 - matched / s.bits,
            p_value=p,
            log10_p=stats.log10_p(matched, s.bits),
            alpha=s.alpha,
            threshold_bits=stats.threshold_bits(s.bits, s.alpha),
            marked=p < s.alpha,
            commitment=self.commitment,
            realigned=realigned,
        )


def _summed_over(t: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """The sum of ``t`` over ``group``, differentiable in this rank's own term only. Every stage computes the
    same regulariser from the same sums, so each weight's gradient is the whole model's, and the backward needs
    no collective: a stage that holds no carrier has nothing to backpropagate."""
    total = t.detach().clone()
    dist.all_reduce(total, group=group)
    return t + (total - t.detach())
