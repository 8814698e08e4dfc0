"""An exponential moving average of the weights (train.ema_decay): the weights a run validates, saves and translates
with, while the optimizer goes on training its own (fairseq's `--ema-decay`, Marian's `--exponential-smoothing`).

After each update the average moves toward the trained weights by 1 - d, where d grows with the updates averaged
so far, n, as TensorFlow's `ExponentialMovingAverage(num_updates=...)` lets it: d = min(decay, (1 + n) / (10 + n)).
So an average started at step 0 follows the fast early changes closely (d 0.1 at n 0, 0.92 at n 90), and reaches
its full memory only after ~10 / (1 - decay) updates: a run of a thousand updates averages roughly its last tenth
at any decay of 0.99 or more, rather than carrying its first weights into the end.

One foreach lerp over every floating-point tensor per update, on the device and without a host sync (the decay is
a host float of the update count); integer buffers are copied.
"""

from __future__ import annotations

import copy

import torch
from torch import nn


def decay_after(updates: int, decay: float) -> float:
    """The decay applied by the update that follows `updates` averaged ones."""
    return min(decay, (1 + updates) / (10 + updates))


class WeightAverage:
    """`model` holds the average: a copy of the trained model (no gradients, eval mode), updated from `trained`."""

    def __init__(self, trained: nn.Module, decay: float):
        if not 0.0 < decay < 1.0:
            raise ValueError(f"decay must lie in (0, 1), got {decay}")
        self.trained, self.decay = trained, decay
        self.model = copy.deepcopy(trained).eval().requires_grad_(False)  # draws no random numbers
        self._pair_tensors()

    def _pair_tensors(self) -> None:
        # By parameters and buffers, not state_dict keys: a tied embedding is one tensor under two keys, and would be
        # moved twice. The copy keeps the trained model's order and its ties.
        pairs = list(zip(self.model.parameters(), self.trained.parameters()))
        pairs += list(zip(self.model.buffers(), self.trained.buffers()))
        self._averaged = [mine.data for mine, _ in pairs if mine.is_floating_point()]
        self._trained = [theirs.data for mine, theirs in pairs if mine.is_floating_point()]
        self._copied = [(mine.data, theirs.data) for mine, theirs in pairs if not mine.is_floating_point()]

    @torch.no_grad()
    def update(self, updates: int) -> None:
        """Move the average toward the trained weights as they are after this update, the average having taken in
        `updates` before it."""
        weight = 1.0 - decay_after(updates, self.decay)
        torch._foreach_lerp_(self._averaged, self._trained, weight)
        for mine, theirs in self._copied:
            mine.copy_(theirs)

    @torch.no_grad()
    def restart_from_trained(self) -> None:
        """The average starts again from the trained weights as they are (a resumed run that had none)."""
        for mine, theirs in zip(self._averaged, self._trained):
            mine.copy_(theirs)
        for mine, theirs in self._copied:
            mine.copy_(theirs)
