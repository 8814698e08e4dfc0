"""`nmt average`: the element-wise mean of a run's last N saved weights (Vaswani et al. 2017; fairseq's
average_checkpoints), written as checkpoints/averaged.pt for translate and evaluate."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from nmt.errors import NMTError, counted
from nmt.run_dir import CheckpointKind, Run, Weights


class TooFewCheckpoints(NMTError):
    """Fewer than two step checkpoints: nothing to average (`nmt average --allow-fewer` lets a script go on)."""


def average_checkpoints(run: Run, last: int) -> tuple[Path, list[Path]]:
    """Average the newest `last` step checkpoints (train.keep_last keeps them); return (averaged.pt, inputs).
    A training may go on beside it: the files are opened first, so that its rotation (train.keep_last) cannot remove
    one between the listing and its read."""
    with run.opened_step_checkpoints(last) as opened:
        return _average(run, opened)


def _average(run: Run, opened: list[tuple[Path, BinaryIO]]) -> tuple[Path, list[Path]]:
    paths = [path for path, _ in opened]
    if len(paths) < 2:
        raise TooFewCheckpoints(f"{run.directory} has {counted(len(paths), 'step checkpoint')}; averaging needs at "
                                "least 2 (train with train.keep_last: N and train.save_every: K)")
    total, first, newest = None, None, None
    for path, handle in opened:
        newest = run.load_weights(path, handle)
        weights = newest.model
        if total is None:
            first = newest
            total = {k: v.double().clone() if v.is_floating_point() else v for k, v in weights.items()}
            continue
        if weights.keys() != total.keys():
            raise NMTError(f"{path} holds other parameters than {paths[0]}: not the same model")
        mismatched = [k for k, v in weights.items() if v.shape != total[k].shape or v.dtype != first.model[k].dtype]
        if mismatched:
            raise NMTError(f"{path} and {paths[0]} differ in the shape of {mismatched[0]} "
                           f"({tuple(weights[mismatched[0]].shape)} vs {tuple(total[mismatched[0]].shape)}): not the "
                           "same model")
        for key, value in weights.items():
            if value.is_floating_point():
                total[key] += value.double()
    # Tied weights appear under several names but are one tensor: average each name, the copies stay equal.
    averaged = {k: (v / len(paths)).to(first.model[k].dtype) if v.is_floating_point() else v
                for k, v in total.items()}
    result = Weights(model=averaged, config=first.config, model_args=first.model_args,
                     nmt_version=first.nmt_version, step=newest.step, averaged_from=[p.name for p in paths])
    return run.save(CheckpointKind.AVERAGED, result), paths
