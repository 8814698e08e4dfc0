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
    groups = [{"params": params, "weight_decay": weight_decay}
              for params, weight_decay in zip((decay, no_decay), group_weight_decays(cfg))]
    # eps 1e-9 and betas (0.9, 0.98) as in Vaswani et al. (2017), on every device.
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9, fused=True)


# How AdamW computes an update, not what it has learnt: the flags of the optimizer this build makes. `load_state_dict`
# takes each saved group whole, flags too, so a run saved before AdamW was fused (`fused: False`) resumed on the
# single-tensor path, which refuses the device-side skip flag every update hands it (found_inf): "Expected grad_scale
# and found_inf to be None". `capturable` too stays this build's (GraphedUpdate sets it only while it captures).
IMPLEMENTATION_FLAGS = ("fused", "foreach", "capturable", "differentiable")


def load_optimizer_state(optimizer: torch.optim.Optimizer, saved: dict) -> None:
    """Load a saved `state_dict` into `optimizer`, keeping its implementation flags (set before the load: torch moves
    each parameter's `step` onto its device for a fused or capturable group only) and a float lr (a CUDA-graph run
    saves a device tensor)."""
    built = [{key: group[key] for key in IMPLEMENTATION_FLAGS if key in group} for group in optimizer.param_groups]
    groups = [{**group, **(built[i] if i < len(built) else {})} for i, group in enumerate(saved["param_groups"])]
    optimizer.load_state_dict({**saved, "param_groups": groups})
    for group in optimizer.param_groups:
        group["lr"] = float(group["lr"])


def group_weight_decays(cfg: TrainConfig) -> tuple[float, float]:
    """The weight decay of `make_optimizer`'s two parameter groups: the matrices', and the vectors' (none)."""
    return cfg.weight_decay, 0.0


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
                                                          factor=cfg.plateau_factor, patience=plateau_patience(cfg))
    if cfg.schedule == "constant":
        warmup = max(1, cfg.warmup_steps)
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
    if cfg.schedule in ("linear", "cosine"):
        decay = linear_decay if cfg.schedule == "linear" else cosine_decay
        return torch.optim.lr_scheduler.LambdaLR(optimizer, decay(cfg.warmup_steps, cfg.max_steps, cfg.time_budget_s,
                                                                  clock))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, inverse_sqrt(cfg.warmup_steps))


def plateau_patience(cfg: TrainConfig) -> int:
    """Validations without gain before the plateau schedule lowers the lr: a third of early stopping's."""
    return max(1, cfg.patience // 3)


def resume_schedule(optimizer: torch.optim.Optimizer, scheduler, scheduler_state: dict, saved: TrainConfig,
                    cfg: TrainConfig, step: int) -> list[str]:
    """After a resume loaded the optimizer's state: the schedule's, with the config's (`cfg`) hyperparameters where
    they changed since the run saved them (`saved`). The two states hold what they were made with: a resumed run went
    on at its old train.lr, weight_decay and plateau settings in silence, while its config.yaml said the new, and a
    schedule of another kind was an error ("does not fit this model: 'lr_lambdas'") or a state mixed of two. A new lr
    scales the schedule where it stands; a new kind of schedule takes over where it stands after `step` updates.
    Returns what changed, to be said; with nothing changed every value is as loaded, bit for bit."""
    if cfg.schedule != saved.schedule:
        changed = [_take_over(optimizer, scheduler, saved, cfg, step)]
        if cfg.lr != saved.lr:
            changed.append(f"train.lr changed from {saved.lr:g} to {cfg.lr:g}: the new schedule's peak")
    else:
        scheduler.load_state_dict(scheduler_state)
        changed = _rescaled(optimizer, scheduler, saved, cfg)
        if not scheduler_steps_per_update(scheduler):
            if cfg.plateau_factor != saved.plateau_factor:
                changed.append(f"train.plateau_factor changed from {saved.plateau_factor:g} to "
                               f"{cfg.plateau_factor:g}")
            if plateau_patience(cfg) != plateau_patience(saved):
                changed.append(f"train.patience changed from {saved.patience} to {cfg.patience}: the plateau "
                               f"schedule waits {plateau_patience(cfg)} validations without gain, not "
                               f"{plateau_patience(saved)}")
            scheduler.factor, scheduler.patience = cfg.plateau_factor, plateau_patience(cfg)
    if cfg.weight_decay != saved.weight_decay:
        changed.append(f"train.weight_decay changed from {saved.weight_decay:g} to {cfg.weight_decay:g}")
    for group, weight_decay in zip(optimizer.param_groups, group_weight_decays(cfg)):
        group["weight_decay"] = weight_decay
    return changed


def _rescaled(optimizer: torch.optim.Optimizer, scheduler, saved: TrainConfig, cfg: TrainConfig) -> list[str]:
    """A loaded schedule scaled to the config's lr where it changed: the next factor (or a plateau's reductions so
    far) kept, at the new peak."""
    if cfg.lr == saved.lr:
        return []
    scale = cfg.lr / saved.lr
    for group in optimizer.param_groups:
        group["lr"] = group["lr"] * scale
        if "initial_lr" in group:
            group["initial_lr"] = group["initial_lr"] * scale
    if scheduler_steps_per_update(scheduler):
        scheduler.base_lrs = [lr * scale for lr in scheduler.base_lrs]
    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]  # what get_last_lr() reports
    return [f"train.lr changed from {saved.lr:g} to {cfg.lr:g}: the schedule goes on from where it was, at the new "
            f"scale (lr {optimizer.param_groups[0]['lr']:.3g} now)"]


def _take_over(optimizer: torch.optim.Optimizer, scheduler, saved: TrainConfig, cfg: TrainConfig, step: int) -> str:
    """The config's new kind of schedule (made afresh, its base the config's lr) put where it stands after `step`
    updates: a step-based one at its factor for that step, a plateau at train.lr (it starts there)."""
    if scheduler_steps_per_update(scheduler):
        scheduler.last_epoch = step
        lrs = [base * factor(step) for base, factor in zip(scheduler.base_lrs, scheduler.lr_lambdas)]
    else:
        lrs = [cfg.lr] * len(optimizer.param_groups)
    for group, lr in zip(optimizer.param_groups, lrs):
        group["lr"], group["initial_lr"] = lr, cfg.lr
    scheduler._last_lr = lrs
    return (f"train.schedule changed from {saved.schedule} to {cfg.schedule}: the new schedule takes over at step "
            f"{step} (lr {lrs[0]:.3g} now)")


def scheduler_steps_per_update(scheduler) -> bool:
    """True for schedules stepped after every update; False for ReduceLROnPlateau (stepped per validation)."""
    return not isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)
