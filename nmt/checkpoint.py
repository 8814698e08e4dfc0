"""Checkpoints hold tensors and plain values only, are written atomically and loaded with weights_only=True."""

from __future__ import annotations

import errno
import hashlib
import os
import pickle
import random
import threading
import time
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import Any, BinaryIO, Callable

import numpy as np
import torch

from nmt.atomic import atomic_file
from nmt.errors import NMTError


CHECKSUM_KEY = "content_sha256"


def content_digest(obj: Any) -> str:
    """sha256 over every tensor's bytes and every plain value, in a fixed order (dict keys sorted)."""
    digest = hashlib.sha256()

    def feed(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            digest.update(f"T{value.dtype}{tuple(value.shape)}".encode())
            # The array's buffer itself, not a bytes copy of it (the same bytes, ~15% sooner on a 612 MB last.pt).
            digest.update(value.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
        elif isinstance(value, dict):
            for key in sorted(value, key=str):
                digest.update(f"K{key!r}".encode())
                feed(value[key])
        elif isinstance(value, (list, tuple)):
            digest.update(f"L{len(value)}".encode())
            for item in value:
                feed(item)
        else:
            digest.update(f"V{value!r}".encode())

    feed(obj)
    return digest.hexdigest()


def save_checkpoint(payload: dict, path: Path) -> None:
    """Temp file in the same directory, fsync, rename: a crash mid-write never damages the previous file.

    The payload carries a content checksum, so a flipped byte is reported on load instead of loading wrong weights.
    """
    path = Path(path)
    payload = {**payload, CHECKSUM_KEY: content_digest(payload)}
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_file(path) as handle:
            torch.save(payload, handle)
    except (RuntimeError, OSError) as err:  # a full disk or a quota: torch's writer says RuntimeError (2.13) or
        # the file's own OSError (2.4); the fsync and rename after it OSError
        full = not isinstance(err, OSError) or err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
        raise NMTError(f"cannot write checkpoint {path}: {str(err).strip().splitlines()[0][:120]}"
                       f"{' (is the disk full?)' if full else ''}; {path.name} was left as it was") from None


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu", handle: BinaryIO | None = None) -> dict:
    """The checkpoint at `path`, its checksum verified; read from `handle` where given (`path` then only names it:
    an open file stays readable after a training's rotation removed its name)."""
    path = Path(path)
    state = _torch_load(path, handle, map_location=map_location)
    if isinstance(state, dict) and CHECKSUM_KEY in state:  # older checkpoints have none
        expected = state.pop(CHECKSUM_KEY)
        if content_digest(state) != expected:
            raise NMTError(f"checkpoint {path} is corrupt: its contents do not match the checksum saved with them")
    return state


def peek_checkpoint(path: Path) -> Any:
    """A checkpoint's plain values (its step, its config) without reading its tensors: torch.load maps the file
    (mmap=True) and reads only what is looked at, where `load_checkpoint` reads every byte and hashes it (a
    transformer.yaml last.pt: 612 MB, ~1 s). For what a checkpoint says of itself only; the weights to use come from
    `load_checkpoint`, checked against their checksum."""
    return _torch_load(Path(path), map_location="cpu", mmap=True)


def _torch_load(path: Path, handle: BinaryIO | None = None, **options) -> Any:
    """torch.load(weights_only=True) of `path` (or of `handle`, the file opened), or a one-line error that says what
    the file is."""
    if handle is None and not path.is_file():
        raise NMTError(f"checkpoint not found: {path}")
    if (os.fstat(handle.fileno()) if handle is not None else path.stat()).st_size == 0:
        raise NMTError(f"cannot read checkpoint {path}: the file is empty")
    try:
        with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": a foreign file gets one line, below
            warnings.simplefilter("ignore")
            return torch.load(handle if handle is not None else path, weights_only=True, **options)
    except Exception as err:  # noqa: BLE001 - corrupt or foreign file: report it as one line
        raise NMTError(f"cannot read checkpoint {path}: {_unreadable_reason(path, handle, err)}") from None


def _unreadable_reason(path: Path, handle: BinaryIO | None, err: Exception) -> str:
    """Why torch.load refused `path`, in the user's terms. torch's own message for a file weights_only=True will not
    load suggests loading it with weights_only=False: never the advice here (that runs the file's code)."""
    with nullcontext(handle) if handle is not None else path.open("rb") as source:
        source.seek(0)
        is_zip = source.read(4) == b"PK\x03\x04"  # what torch.save writes (a zip archive)
    refused_objects = isinstance(err, pickle.UnpicklingError) and "Weights only load failed" in str(err)
    if is_zip and refused_objects:
        return ("it holds Python objects besides tensors and plain values, which nmt never loads (it reads "
                "checkpoints with torch.load(weights_only=True)): not a checkpoint nmt wrote")
    if is_zip:
        first = str(err).strip().splitlines()[0].split(". ")[0] if str(err).strip() else type(err).__name__
        return f"the file is damaged or truncated ({first[:120]})"
    return "not a PyTorch checkpoint (torch.save writes a zip archive)"


def capture_rng_state(device: torch.device | None = None) -> dict[str, Any]:
    """Python, NumPy and torch CPU generators, and the generator of this process's GPU (not every GPU's: each rank
    owns one, and a resumed run may see another number of GPUs)."""
    np_state = np.random.get_state()
    python_state = random.getstate()
    state = {
        "python": [python_state[0], list(python_state[1]), python_state[2]],
        "numpy": {"name": np_state[0], "keys": torch.from_numpy(np_state[1].astype(np.int64)), "pos": int(np_state[2]),
                  "has_gauss": int(np_state[3]), "cached_gaussian": float(np_state[4])},
        "torch": torch.get_rng_state(),
    }
    if device is not None and device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_rng_state(state: dict[str, Any], device: torch.device | None = None) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    np_state = state["numpy"]
    np.random.set_state((np_state["name"], np_state["keys"].numpy().astype(np.uint32), np_state["pos"],
                         np_state["has_gauss"], np_state["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and device is not None and device.type == "cuda":
        cuda_state = state["cuda"]
        if isinstance(cuda_state, (list, tuple)):  # older checkpoints saved every GPU's generator
            cuda_state = cuda_state[device.index or 0] if len(cuda_state) > (device.index or 0) else None
        if cuda_state is not None:
            torch.cuda.set_rng_state(cuda_state.cpu(), device)


def snapshot(obj: Any) -> Any:
    """A copy of `obj` on the CPU that training may not change: every tensor copied (from a GPU through one
    transfer each, then a single wait), plain values as they are. What a background writer may hold."""

    def copy(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            value = value.detach()
            return value.to("cpu", non_blocking=True) if value.is_cuda else value.clone()
        if isinstance(value, dict):
            return {key: copy(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(copy(item) for item in value)
        return value

    result = copy(obj)
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()  # the non-blocking copies above have landed
    return result


class BackgroundWriter:
    """Runs checkpoint writes (hashing, torch.save, fsync, rename) on one thread while training goes on.

    One write at a time, in order: `submit` first waits for the previous one. A write's error is raised in the
    training thread at the next `submit` or `wait`, so a full disk still stops training with its one-line error.
    The writes themselves are the atomic ones of `save_checkpoint`: an interrupted write leaves the old file.
    """

    def __init__(self):
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.last_seconds: float | None = None  # how long the last finished write took

    def submit(self, write: Callable[[], None]) -> None:
        self.wait()
        self._thread = threading.Thread(target=self._run, args=(write,), name="checkpoint-writer", daemon=True)
        self._thread.start()

    def _run(self, write: Callable[[], None]) -> None:
        started = time.perf_counter()
        try:
            write()
        except BaseException as err:  # noqa: BLE001 - handed to the training thread
            self._error = err
        self.last_seconds = time.perf_counter() - started

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error
