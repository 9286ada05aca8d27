"""AdamW written out step by step (decoupled weight decay, bias-corrected moments).

Why not torch.optim.AdamW: the fused and apex optimizers are checked against this independent spelling of
the update rule, and it runs on anything torch math runs on (DTensor parameters included).
"""

from __future__ import annotations

import torch


class ReferenceAdamW(torch.optim.Optimizer):
    def __init__(self, params, lr: float, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
        if lr < 0.0:
            raise ValueError(f"adamw lr must be >= 0, got {lr}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"adamw betas must each be in [0, 1), got {tuple(betas)}")
        if eps < 0.0 or weight_decay < 0.0:
            raise ValueError(f"adamw eps and weight_decay must be >= 0, got eps={eps}, wd={weight_decay}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                t = state["step"]
                # The arithmetic is fp32 whatever the parameter dtype (state is stored in it), so for bf16
                # the reference is the accurate side of a comparison, like the fused kernels.
                g = p.grad.float()
                m = state["exp_avg"].float().mul_(b1).add_(g, alpha=1.0 - b1)
                v = state["exp_avg_sq"].float().mul_(b2).addcmul_(g, g, value=1.0 - b2)
                state["exp_avg"].copy_(m)
                state["exp_avg_sq"].copy_(v)
                m_hat = m / (1.0 - b1**t)
                v_hat = v / (1.0 - b2**t)
                new = p.float() * (1.0 - lr * wd) - lr * m_hat / (v_hat.sqrt() + eps)
                p.copy_(new)
        return loss
