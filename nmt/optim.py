"""Optimizer and learning-rate schedules (torch.optim.lr_scheduler)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from nmt.config import TrainConfig


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    """AdamW, fused (one kernel per step, on CUDA and CPU alike; it also skips a non-finite update on the device,
    see Trainer.train_step); no weight decay on biases, norms and embeddings' 1-D cousins."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # eps 1e-9 and betas (0.9, 0.98) as in Vaswani et al. (2017), on every device.
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9, fused=True)


def inverse_sqrt(warmup_steps: int):
    """Linear warmup to the peak lr, then decay with 1/sqrt(step) (Vaswani et al. 2017, fairseq)."""
    def factor(step: int) -> float:
        step += 1
        if warmup_steps == 0:
            return 1.0 / math.sqrt(step)
        return min(step / warmup_steps, math.sqrt(warmup_steps / step))
    return factor


@dataclass
class TrainingClock:
    """Seconds of training so far (over every resumed session, validation included), as last agreed by every rank:
    the clock a time-budgeted schedule reads. Under torchrun the ranks agree on it every `log_every` updates, so that
    every replica applies the same lr."""
    elapsed_s: float = 0.0


def _budgeted(shape, warmup_steps: int, max_steps: int, time_budget_s: float, clock: TrainingClock | None):
    """Linear warmup to the peak lr, then `shape` of the share of training left (1 → 0) where training ends: at
    `max_steps`, or, with a time budget, as the budget runs out (the share of its seconds left), whichever is lower.
    By the clock, the lr of a step depends on the machine's speed, as the step a time budget ends at does."""
    def factor(step: int) -> float:
        step += 1
        if step <= warmup_steps:
            return step / warmup_steps
        steps_left = max(0.0, (max_steps - step + 1) / (max_steps - warmup_steps))
        if not time_budget_s or clock is None:
            return shape(steps_left)
        return shape(min(steps_left, max(0.0, 1.0 - clock.elapsed_s / time_budget_s)))
    return factor


def linear_decay(warmup_steps: int, max_steps: int, time_budget_s: float = 0.0, clock: TrainingClock | None = None):
    """A straight line to zero where training ends (`_budgeted`): the schedule that suits a fixed, short budget (Li
    et al. 2020, "Budgeted training"), where 1/sqrt(step) would stop while the lr is still high."""
    return _budgeted(lambda left: left, warmup_steps, max_steps, time_budget_s, clock)


def cosine_decay(warmup_steps: int, max_steps: int, time_budget_s: float = 0.0, clock: TrainingClock | None = None):
    """Half a cosine to zero where training ends (`_budgeted`; Loshchilov & Hutter 2017 without restarts, fairseq's
    and Hugging Face's cosine with warm-up): longer near the peak than the straight line, then steeper, then flat."""
    return _budgeted(lambda left: 0.5 * (1.0 - math.cos(math.pi * left)), warmup_steps, max_steps, time_budget_s,
                     clock)


def make_scheduler(optimizer: torch.optim.Optimizer, cfg: TrainConfig, clock: TrainingClock | None = None):
    """`inverse_sqrt`, `linear`, `cosine` and `constant` step per update; `plateau` multiplies the lr by
    plateau_factor when `train.best_metric` stops improving. `linear` and `cosine` under `train.time_budget_s` read
    `clock`."""
    if cfg.schedule == "plateau":
        return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min" if cfg.best_metric == "loss" else "max",
                                                          factor=cfg.plateau_factor, patience=max(1, cfg.patience // 3))
    if cfg.schedule == "constant":
        warmup = max(1, cfg.warmup_steps)
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
    if cfg.schedule in ("linear", "cosine"):
        decay = linear_decay if cfg.schedule == "linear" else cosine_decay
        return torch.optim.lr_scheduler.LambdaLR(optimizer, decay(cfg.warmup_steps, cfg.max_steps, cfg.time_budget_s,
                                                                  clock))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, inverse_sqrt(cfg.warmup_steps))


def scheduler_steps_per_update(scheduler) -> bool:
    """True for schedules stepped after every update; False for ReduceLROnPlateau (stepped per validation)."""
    return not isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)
