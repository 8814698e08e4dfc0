"""Where a training stands (`Progress`: with the RNG states, all that exact resume needs besides tensors), and
which of the config's limits ends it."""

from __future__ import annotations

from dataclasses import dataclass

from nmt.config import TrainConfig


METRIC_NAMES = {"bleu": "BLEU", "chrf": "chrF", "loss": "loss"}  # train.best_metric as the log says it


def improves(value: float, best: float | None, metric: str) -> bool:
    """Whether a validation's `value` of `metric` beats `best` (lower is better for the loss)."""
    return best is None or (value < best if metric == "loss" else value > best)


@dataclass
class Progress:
    """Where training stands; with the RNG states this is all exact resume needs besides tensors."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0  # batches of this epoch consumed so far, by all ranks together
    best_bleu: float = -1.0  # the best dev BLEU seen, whatever train.best_metric is (-1: none yet, as checkpoints say)
    best_metric: str = "bleu"  # what best_score and evals_without_gain count (train.best_metric when they were set)
    best_score: float | None = None  # its best value so far (None: no validation yet, or from before this field)
    evals_without_gain: int = 0
    finished: bool = False
    elapsed_s: float = 0.0  # training wall-clock up to the last checkpoint, over every resumed session
    # train.eval_in_background: this step's validation was handed over, its outcome not yet taken (a checkpoint
    # saved then is validated again when resumed: nmt.background_validation)
    validation_pending: bool = False
    averaged_since: int = 0  # train.ema_decay: the step its average started from (the updates since set the decay)

    @property
    def validated(self) -> bool:
        """A validation has scored dev BLEU (best_bleu holds a score, not the sentinel)."""
        return self.best_bleu >= 0

    def chosen_best(self) -> str:
        """What picked best.pt, for a log line, when it is not dev BLEU (which the line names anyway)."""
        if self.best_metric == "bleu" or self.best_score is None:
            return ""
        return f"; best.pt by dev {METRIC_NAMES[self.best_metric]}: {self.best_score:.4g}"


def finished_reason(p: Progress, cfg: TrainConfig, out_of_time: bool) -> str | None:
    """Which limit of the config ends (or ended) training at `p`, in the config's terms; None: none does."""
    if p.step >= cfg.max_steps:
        return f"train.max_steps {cfg.max_steps} reached"
    if p.epoch >= cfg.max_epochs:
        return f"train.max_epochs {cfg.max_epochs} reached"
    if p.finished:
        return (f"no dev-{METRIC_NAMES[cfg.best_metric]} gain in the last {p.evals_without_gain} validations "
                f"(train.patience {cfg.patience})")
    if out_of_time:
        return f"train.time_budget_s {cfg.time_budget_s:g} spent"
    return None


def steps_within_budget(step: int, elapsed_s: float, budget_s: float, planned_steps: int) -> int:
    """The step at which a time budget will end training at the pace so far (validation included), never past the
    planned steps nor before the current one."""
    if step <= 0 or elapsed_s <= 0:
        return planned_steps
    return max(step, min(planned_steps, round(budget_s * step / elapsed_s)))
