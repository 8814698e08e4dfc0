"""Resuming a run from its `last.pt`: the weights (and their average), optimizer, schedule, scaler, this rank's RNG
state and the progress counters, as an uninterrupted run would have them at that step; then what changed in the
config since (train.best_metric, train.ema_decay) carried over in the way that keeps the run's record honest.

    progress = restore_training(state, path, run.directory, parts, cfg, rank, world_size, is_main, say)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from nmt.checkpoint import restore_rng_state
from nmt.config import Config, from_dict
from nmt.errors import NMTError
from nmt.models.builder import upgrade_state_dict
from nmt.optim import load_optimizer_state, resume_schedule, scheduler_steps_per_update
from nmt.progress import METRIC_NAMES, Progress
from nmt.run_dir import TrainingState
from nmt.weight_average import WeightAverage


@dataclass
class TrainingParts:
    """What a checkpoint's state is loaded into: built for this config before the resume."""

    model: nn.Module
    average: WeightAverage | None  # train.ema_decay's, on rank 0
    optimizer: torch.optim.Optimizer
    scheduler: object
    scaler: torch.amp.GradScaler
    device: torch.device


def restore_training(state: TrainingState, path: Path, run_directory: Path, parts: TrainingParts, cfg: Config,
                     rank: int, world_size: int, is_main: bool, say: Callable[[str], None]) -> Progress:
    """Load `state` (read from `path`) into `parts` and return the progress it was saved at; a checkpoint of another
    shape is a one-line error naming the file. On the CPU RNG states stay CPU tensors; `load_state_dict` copies the
    weights onto the model's device."""
    averaged = state.trained_model is not None  # saved under train.ema_decay: `model` is the average
    try:
        parts.model.load_state_dict(upgrade_state_dict(state.trained_model if averaged else state.model))
        if parts.average is not None and averaged:
            parts.average.model.load_state_dict(upgrade_state_dict(state.model))
        load_optimizer_state(parts.optimizer, state.optimizer)
        changed = resume_schedule(parts.optimizer, parts.scheduler, state.scheduler, from_dict(state.config).train,
                                  cfg.train, state.progress["step"])
        parts.scaler.load_state_dict(state.scaler)
    except (KeyError, RuntimeError, ValueError, TypeError) as err:
        raise NMTError(f"{path} does not fit this model: {str(err).splitlines()[0]}") from None
    for line in changed:
        say(line)
    restore_rng_state(rank_rng_state(state.rng, rank, world_size, say), parts.device)
    fields = {f.name for f in dataclasses.fields(Progress)}
    progress = Progress(**{k: v for k, v in state.progress.items() if k in fields})
    say(f"resuming {run_directory} from step {progress.step}")
    carry_best_metric(progress, cfg.train.best_metric, parts.scheduler, say)
    carry_average(progress, parts.average, averaged, is_main, say)
    return progress


def rank_rng_state(saved: dict | list[dict], rank: int, world_size: int, say: Callable[[str], None]) -> dict:
    """This rank's saved RNG state: newer checkpoints hold one per rank; a run resumed on another number of ranks
    takes them round robin, and its dropout masks then differ from an uninterrupted run's (said)."""
    if not isinstance(saved, list):
        return saved
    if len(saved) != world_size:
        say(f"warning: checkpoint holds {len(saved)} ranks' RNG states, this run has {world_size}: dropout after "
            "resume differs from an uninterrupted run")
    return saved[rank % len(saved)]


def carry_best_metric(progress: Progress, metric: str, scheduler, say: Callable[[str], None]) -> None:
    """A resumed run's best score and patience count stand for the metric they were kept in: a checkpoint from
    before train.best_metric kept dev BLEU; another metric now starts both afresh (best.pt is replaced at the
    next validation)."""
    p = progress
    if p.best_score is None and p.best_metric == "bleu" and p.validated:
        p.best_score = p.best_bleu
    if p.best_metric != metric:
        if not scheduler_steps_per_update(scheduler):  # its saved state compares values of the old metric
            raise NMTError(f"this run's plateau schedule follows dev {METRIC_NAMES[p.best_metric]}: resume it "
                           f"with train.best_metric {p.best_metric}, or start a new run for {metric}")
        say(f"train.best_metric is {metric} now, {p.best_metric} before: best.pt and train.patience count "
            f"from the next validation")
        p.best_metric, p.best_score, p.evals_without_gain = metric, None, 0


def carry_average(progress: Progress, average: WeightAverage | None, saved: bool, is_main: bool,
                  say: Callable[[str], None]) -> None:
    """The resumed average goes on with its update count; train.ema_decay set or unset since, it starts from the
    trained weights, or ends (the trained weights are validated and saved from here on)."""
    if average is not None:
        if not saved:
            average.restart_from_trained()
            progress.averaged_since = progress.step
            say(f"train.ema_decay {average.decay:g}: the average of the weights starts from the "
                f"weights of step {progress.step}")
    elif saved and is_main:
        say("train.ema_decay is 0 now: training goes on from the trained weights and validates and saves them, "
            "not their average")
