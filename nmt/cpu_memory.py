"""A CPU training process's memory kept flat while its batch shapes change.

Token-bucketed batches change shape at almost every update, and on a CPU two things then grow with the number of
shapes met, not with what is in use (measured on an AVX512-BF16 CPU under bf16 autocast, `configs/cpu-base.yaml` at
4,096 tokens: 3.7 GiB resident after 4 minutes, 4.12 GiB after 12 in issue 15's run; docs/results.md, "Training
memory"):

- glibc's malloc keeps freed heap blocks for reuse instead of returning them, and raises its mmap threshold each time
  a large mmapped block is freed (up to 32 MiB), so the activations of later shapes come from a heap that fragments
  and never shrinks. `malloc_trim(0)` hands the free pages back (madvise). Trimming after every update costs time
  (the next update faults its pages in again: 0.85x tokens/s there), so `HeapTrimmer` trims only once the resident
  set has grown by a slack beyond one update's working set.
- oneDNN, which runs bf16 matmuls on such a CPU, caches a kernel per matmul shape, 1,024 by default: ~0.3 GiB there
  once full, its kernels' blocks scattered through the heap between the activations. With 64 it trained as fast
  (results/heap-trim-probe-cpu-bf16.json); with 16 the 12-minute run of issue 15 peaked lower (1.93 and 1.89 GiB
  against 2.00 and 2.03 with 64), trimmed less often and trained faster (results/heap-policy-probe-cpu-bf16.json,
  results/train-memory-cpu-base-bf16-720s-cache16.json, ...-cache16-run2.json), so 16 is `train.onednn_cache`'s
  default. The bound's price is remade kernels: a kernel is made again whenever its shape has left the cache, and on
  a CPU with AMX making one is slow. There, the demo's small batches (1,000 tokens) trained its 420 s at 7,994
  tokens/s with 16, 9,951 with 1,024 and 13,032 with 4,096 (dev BLEU 43.49, 46.39, 51.52; 2.66 GiB peak at 4,096
  over the 420 s, 0.99 and 1.68 GiB at 16 and 1,024 over 300 and 1,000 updates), while `cpu-base.yaml` at 4,096
  tokens trained as fast with 16 as with 1,024 (8.3k/8.5k tokens/s) and peaked 0.8 GiB higher with 1,024
  (results/onednn-cache-*-cpu-amx.json, results/demo-en-fr-cpu-amx-*.json): the demo's configs set 4,096.

Validation and translation meet shapes of their own (every decode step's cache is one token longer), and their heap
grows the same way: the translator trims between its batches too. They keep oneDNN's default cache: serving the demo
model on the AMX CPU, 16 kernels gave 6–13% fewer sentences/s (by load) for 0.36 GiB less peak and 4,096 no more speed
(results/serve-bench-onednn-cache-*-cpu-amx.json).

Elsewhere than Linux with glibc the trimmer does nothing.
"""

from __future__ import annotations

import ctypes
import os
from typing import Callable

import torch

DEFAULT_SLACK_BYTES = 128 * 2**20


def limit_onednn_cache(capacity: int) -> None:
    """Bound oneDNN's kernel cache (`train.onednn_cache`), unless the user set ONEDNN_PRIMITIVE_CACHE_CAPACITY.
    oneDNN reads it when it first builds a kernel, so this must run before the process's first bf16 matmul (later,
    it changes nothing)."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(capacity))


def resident_bytes() -> int | None:
    """This process's resident set (Linux), or None where it cannot be read."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _glibc_malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim  # the running process's C library: glibc has it, musl and macOS not
    except (OSError, AttributeError):
        return None


class HeapTrimmer:
    """Called after each update (and after validation). The first call after a trim notes the resident set holding
    one update's working set (the baseline); a later one trims once the resident set exceeds it by `slack_bytes`.
    `trims` counts the trims."""

    def __init__(self, slack_bytes: int = DEFAULT_SLACK_BYTES):
        self.slack_bytes = slack_bytes
        self.malloc_trim = _glibc_malloc_trim() if resident_bytes() is not None else None
        self.baseline: int | None = None
        self.trims = 0

    def __call__(self, force: bool = False) -> bool:
        """True if it trimmed; `force`: whatever the growth (before work of another kind, such as validation)."""
        if self.malloc_trim is None:
            return False
        resident = resident_bytes()
        if self.baseline is None and not force:
            self.baseline = resident
            return False
        if not force and resident <= self.baseline + self.slack_bytes:
            return False
        self.malloc_trim(0)
        self.baseline, self.trims = None, self.trims + 1
        return True


def heap_trimmer_for(device: torch.device) -> Callable[..., bool]:
    """A `HeapTrimmer` for work on the CPU; on an accelerator, whose memory the host heap does not hold, a no-op."""
    return HeapTrimmer() if device.type == "cpu" else lambda force=False: False
