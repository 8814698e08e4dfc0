"""`train.eval_in_background`: validation on a copy of the weights, on a thread of its own, while training goes on.

Why: on the 2026-11-26 H100 lease, validation took 96 of a 164-s run to dev BLEU (seven validations), while the
GPU waited on the host even during training. Validating a copy of the weights beside the next updates takes that time
off the wall clock wherever the device has room for both (a GPU's queue; not a 2-core CPU, whose cores training
already uses).

What stays exact: a validation's result is taken when it is ready, but acted upon (training stopped by patience) only
at the next validation point, and every checkpoint waits for a pending result first, so where training stops and what
a checkpoint holds do not depend on timing. A checkpoint saved at the very step whose validation has just been
handed over says so (`Progress.validation_pending`), and a resumed run validates that checkpoint's own weights again.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn


@dataclass(frozen=True)
class Validated:
    """One validation's outcome: the step (and epoch, and training seconds) of the weights it scored."""

    step: int
    epoch: int
    time_s: float
    scores: dict  # Trainer.validate's
    seconds: float  # how long it ran


class BackgroundValidation:
    """One validation at a time of `validator` (a model of the same shape as `source`), run by `validate` on a
    thread of its own (and, on a GPU, a stream of its own). `submit` copies `source`'s weights into `validator`,
    which keeps them until the next `submit`: best.pt is saved from them."""

    def __init__(self, source: nn.Module, validator: nn.Module, validate: Callable[[], dict], device: torch.device):
        self.source, self.validator, self.validate, self.device = source, validator, validate, device
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self._thread: threading.Thread | None = None
        self._outcome: Validated | None = None
        self._error: BaseException | None = None

    @property
    def pending(self) -> bool:
        """A validation has been handed over and its outcome not yet taken."""
        return self._thread is not None

    def ready(self) -> bool:
        """The pending validation has finished (taking its outcome will not wait)."""
        return self._thread is not None and not self._thread.is_alive()

    def copy_weights(self) -> None:
        """The validator takes `source`'s weights as they are now (also before a validation run inline on it)."""
        if self._thread is not None:
            raise RuntimeError("a validation is pending: take its outcome first")
        if self.stream is not None:  # the last validation's kernels have read the validator's weights
            torch.cuda.current_stream(self.device).wait_stream(self.stream)
        with torch.no_grad():  # on training's stream, at an update boundary: the weights of this step
            for mine, theirs in zip(self.validator.state_dict().values(), self.source.state_dict().values()):
                mine.copy_(theirs)

    def submit(self, step: int, epoch: int, time_s: float) -> None:
        """Validate `source`'s weights of this step on the thread."""
        self.copy_weights()
        if self.stream is not None:
            self.stream.wait_stream(torch.cuda.current_stream(self.device))
        self._thread = threading.Thread(target=self._run, args=(step, epoch, time_s), name="validation",
                                        daemon=True)
        self._thread.start()

    def _run(self, step: int, epoch: int, time_s: float) -> None:
        started = time.perf_counter()
        try:
            if self.stream is not None:
                with torch.cuda.stream(self.stream):
                    scores = self.validate()
            else:
                scores = self.validate()
            self._outcome = Validated(step, epoch, time_s, scores, time.perf_counter() - started)
        except BaseException as err:  # noqa: BLE001 - raised in the training thread when the outcome is taken
            self._error = err

    def take(self) -> Validated:
        """The pending validation's outcome, waiting for it if need be; its error, if it failed."""
        if self._thread is None:
            raise RuntimeError("no validation is pending")
        self._thread.join()
        self._thread = None
        error, outcome, self._error, self._outcome = self._error, self._outcome, None, None
        if error is not None:
            raise error
        return outcome
