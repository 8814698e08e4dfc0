"""Where tensors live and in which precision: one choice for training, translation and evaluation."""

from __future__ import annotations

import contextlib

import torch

from nmt.errors import NMTError

DEVICES = ("auto", "cpu", "cuda")


def pick_device(requested: str, local_rank: int = 0) -> torch.device:
    """`auto`: this process's GPU when there is one, else the CPU."""
    if requested not in DEVICES and not requested.startswith("cuda:"):
        raise NMTError(f"unknown device {requested!r}: use auto, cpu or cuda")
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise NMTError(f"device {requested} was requested but no CUDA device is available (use auto or cpu)")
    if requested == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    if requested.startswith("cuda:"):
        return torch.device(requested)
    return torch.device("cuda", local_rank)


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """`auto`: bf16 autocast on CUDA (where supported), fp32 (no autocast) on the CPU."""
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    if precision != "fp32" and device.type != "cuda":
        raise NMTError(f"precision {precision} needs a CUDA device; use fp32 or auto on CPU")
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def autocast(device: torch.device, dtype: torch.dtype | None):
    """The autocast context for `dtype` (None: full precision, no autocast)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)
