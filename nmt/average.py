"""`nmt average`: the element-wise mean of a run's last N saved weights (Vaswani et al. 2017; fairseq's
average_checkpoints), written as checkpoints/averaged.pt for translate and evaluate."""

from __future__ import annotations

from pathlib import Path

import torch

from nmt.errors import NMTError
from nmt.run_dir import CONFIG_KEY, MODEL_ARGS_KEY, MODEL_KEY, STEP_KEY, VERSION_KEY, Run


def average_checkpoints(run: Run, last: int) -> tuple[Path, list[Path]]:
    """Average the newest `last` step checkpoints (train.keep_last keeps them); return (averaged.pt, inputs)."""
    paths = run.step_checkpoints()[-last:]
    if len(paths) < 2:
        raise NMTError(f"{run.directory} has {len(paths)} step checkpoint(s); averaging needs at least 2 "
                       "(train with train.keep_last: N and train.save_every: K)")
    total, first = None, None
    for path in paths:
        state = run.load(path)
        weights = state[MODEL_KEY]
        if total is None:
            first = state
            total = {k: v.double().clone() if v.is_floating_point() else v for k, v in weights.items()}
            continue
        if weights.keys() != total.keys():
            raise NMTError(f"{path} holds other parameters than {paths[0]}: not the same model")
        for key, value in weights.items():
            if value.is_floating_point():
                total[key] += value.double()
    # Tied weights appear under several names but are one tensor: average each name, the copies stay equal.
    averaged = {k: (v / len(paths)).to(first[MODEL_KEY][k].dtype) if v.is_floating_point() else v
                for k, v in total.items()}
    payload = {MODEL_KEY: averaged, CONFIG_KEY: first[CONFIG_KEY], VERSION_KEY: first.get(VERSION_KEY),
               STEP_KEY: run.load(paths[-1]).get(STEP_KEY), "averaged_from": [p.name for p in paths]}
    if MODEL_ARGS_KEY in first:
        payload[MODEL_ARGS_KEY] = first[MODEL_ARGS_KEY]
    return run.save("averaged", payload), paths
