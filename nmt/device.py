"""Where tensors live and in which precision: one choice for training, translation and evaluation."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from pathlib import Path
from typing import Iterator

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from nmt.errors import NMTError, counted

DEVICES = ("auto", "cpu", "cuda")


def pick_device(requested: str, local_rank: int = 0) -> torch.device:
    """`auto`: this process's GPU when there is one, else the CPU."""
    if requested not in DEVICES and not requested.startswith("cuda:"):
        raise NMTError(f"unknown device {requested!r}: use auto, cpu or cuda")
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise NMTError(f"device {requested} was requested but no CUDA device is available (use auto or cpu)")
    if requested == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    device = torch.device(requested) if requested.startswith("cuda:") else torch.device("cuda", local_rank)
    avoid_cudnn_attention()
    return device


CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity where the OS says (a container's or `taskset`'s share), else
    the machine's count; at most its CPU quota (`cpu_quota`)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = cpu_quota()
    return min(cpus, quota) if quota else cpus


def cap_threads_at_usable_cpus() -> tuple[int, int] | None:
    """torch's intra-op threads capped at `usable_cpus`: its default is one per CPU of the host (OpenMP's count),
    which a container's CPU quota does not lower, and more threads than CPUs wait on each other at every kernel
    (8 on 2 cores trained at 0.69-0.77x the tokens/s of 2). (threads before, after) where it capped them, else None."""
    threads, cpus = torch.get_num_threads(), usable_cpus()
    if threads <= cpus:
        return None
    torch.set_num_threads(cpus)
    return threads, cpus


def cpu_quota() -> int | None:
    """The CPUs a cgroup's CFS quota allows (rounded up), or None for none: `docker run --cpus=2` on a 64-core host
    leaves the affinity at 64 and sets cgroup v2's cpu.max to "200000 100000" (v1: cpu.cfs_quota_us and
    cpu.cfs_period_us). The tightest quota from this process's own cgroup up to the root counts: a systemd unit's
    CPUQuota, or a container seen without a cgroup namespace of its own, sets it below /sys/fs/cgroup."""
    quotas = [quota for quota in (_quota(*files) for files in _quota_files()) if quota]
    return min(quotas) if quotas else None


def _quota_files() -> Iterator[tuple[Path, Path | None]]:
    """(quota file, period file or None where the quota file holds both): cgroup v1's, then v2's cpu.max of this
    process's cgroup (/proc/self/cgroup's "0::/path") and of each folder above it."""
    v1 = CGROUP_ROOT / "cpu"
    yield v1 / "cpu.cfs_quota_us", v1 / "cpu.cfs_period_us"
    own = ""
    try:
        own = next((line[3:] for line in PROC_CGROUP.read_text().splitlines() if line.startswith("0::")), "")
    except OSError:
        pass
    own_folder = CGROUP_ROOT / own.strip().lstrip("/")
    for folder in (own_folder, *own_folder.parents):
        yield folder / "cpu.max", None
        if folder == CGROUP_ROOT:
            return


def _quota(quota_file: Path, period_file: Path | None) -> int | None:
    try:
        fields = quota_file.read_text().split()
        if period_file is not None:
            fields += period_file.read_text().split()
        quota, period = int(fields[0]), int(fields[1])
    except (OSError, ValueError, IndexError):  # absent, "max" (no quota), or unreadable
        return None
    return max(1, -(-quota // period)) if quota > 0 and period > 0 else None


def oversubscribed_threads_warning(threads: int, cpus: int) -> str:
    """A warning for train.threads past the CPUs ("" where it is not): the extra threads wait on each other at every
    kernel. On a 2-core CPU, 8 threads trained the demo's Transformer at 0.69-0.77x the tokens/s of 2
    (results/bench-train-threads-oversubscribed-cpu-avx2.json)."""
    if threads <= cpus:
        return ""
    return (f"train.threads {threads} is more than the {counted(cpus, 'CPU')} this process may use: the extra "
            f"threads wait on each other at every kernel and slow training (train.threads: {cpus}, or 0)")


def set_training_threads(threads: int, device: torch.device) -> str:
    """torch's intra-op threads for training: train.threads where set, else its default capped at the usable CPUs
    on a CPU. Returns what to say of it ("" for nothing)."""
    if threads:
        torch.set_num_threads(threads)
        oversubscribed = oversubscribed_threads_warning(threads, usable_cpus())
        return oversubscribed and f"warning: {oversubscribed}"
    if device.type == "cpu" and (capped := cap_threads_at_usable_cpus()):
        return (f"train.threads 0: torch's default of {capped[0]} threads is more than the "
                f"{counted(capped[1], 'CPU')} this process may use (its affinity or CPU quota): training with "
                f"{capped[1]}")
    return ""


def context_in_background(device: torch.device) -> threading.Thread | None:
    """Starts making a GPU's context on a thread (the driver's state and the first allocation: seconds) while this
    thread goes on with Python work, which the driver's calls do not block. Join it before this thread's first use
    of the device; a failure on it recurs there and is reported there."""
    if device.type != "cuda":
        return None
    thread = threading.Thread(target=_touch, args=(device,), name="nmt-cuda-context", daemon=True)
    thread.start()
    return thread


def _touch(device: torch.device) -> None:
    with contextlib.suppress(Exception):  # the main thread's first CUDA call meets the same error and says it
        torch.zeros(1, device=device)


# Set NMT_CUDNN_ATTENTION=1 to leave torch's SDPA its cuDNN kernels (for an A/B: scripts/bench_greedy.py).
CUDNN_ATTENTION_ENV = "NMT_CUDNN_ATTENTION"


def avoid_cudnn_attention() -> bool:
    """Keep SDPA off its cuDNN kernels in this process (unless NMT_CUDNN_ATTENTION=1); True when it did.

    Why: recent torch prefers cuDNN's attention on an H100 (pytorch#162073; from torch 2.10 when its cuDNN is past
    9.15, as the one torch 2.11 bundles is: the GPU image's; huggingface/transformers#48163's review), and cuDNN
    attention builds an execution graph for every new shape before its first run (torch's MHAGraphCache; a few
    hundred ms a build, sglang#4650). Training on packed rows meets one shape, but
    decoding meets a new one at every step (the cache one piece longer, the batch smaller as sentences end), and
    validation, translation and serving decode: on the 2026-11-26 H100 lease a validation took 13.7 s, where its
    greedy steps explain a few seconds at most (at most 436 a validation, results/validation-greedy-step-bound-
    transformer.json; 114 kernel-launching operators each, results/decode-step-operators-transformer-cpu-bf16.json;
    at the ~32 µs an operator measured there, ~1.6 s before the search's own). The evening lease confirmed it:
    greedy decoding of the valid split at batch 128 took 17.8 s on its first pass with cuDNN attention against 2.2 s
    without, and ran slower warm at batches 128 and 1,024 (results/gpu-greedy-batch-sizes-transformer-h100.json).
    Flash and memory-efficient attention need no build. Process-wide, decided once: SDPA's choice is a global
    setting, which threads must not toggle (a background validation beside training)."""
    if os.environ.get(CUDNN_ATTENTION_ENV) == "1" or not hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        return False
    torch.backends.cuda.enable_cudnn_sdp(False)
    return True


@functools.cache
def _cpu_flags() -> frozenset[str]:  # read and split once: autocast() asks at every update
    try:
        return frozenset(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return frozenset()


def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    """Native bf16 matrix instructions (AVX512-BF16 or AMX); elsewhere bf16 is emulated and slower than fp32."""
    flags = _cpu_flags() if cpuinfo is None else frozenset(cpuinfo.split())
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """`auto`: bf16 autocast on CUDA (where supported) and on CPUs with native bf16, fp32 (no autocast) elsewhere."""
    if precision == "auto":
        if device.type == "cuda":
            precision = "bf16" if torch.cuda.is_bf16_supported() else "fp32"
        else:
            precision = "bf16" if cpu_has_bf16() else "fp32"
    if precision == "fp16" and device.type != "cuda":
        raise NMTError("precision fp16 needs a CUDA device; use bf16, fp32 or auto on CPU")
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def emulated_bf16(device: torch.device, dtype: torch.dtype | None) -> bool:
    """bf16 asked for (not `auto`) on a CPU without native bf16: it runs, emulated, at ~3% of fp32's speed (the demo's
    update on an AVX2 EPYC, results/bf16-emulated-demo-cpu-avx2.json)."""
    return device.type == "cpu" and dtype == torch.bfloat16 and not cpu_has_bf16()


EMULATED_BF16_NOTE = ("emulated: this CPU has no AVX512-BF16/AMX, bf16 runs at ~3% of fp32's speed; precision auto "
                      "picks fp32")


def autocast(device: torch.device, dtype: torch.dtype | None, cache: bool = True):
    """The autocast context for `dtype` (None: full precision, no autocast). `cache` False: weights cast anew at
    every use, as CUDA graph capture needs (a cached cast would outlive the graph's memory)."""
    if dtype is None:
        return contextlib.nullcontext()
    if emulated_bf16(device, dtype):
        return _emulated_bf16_autocast(cache)
    return torch.autocast(device.type, dtype=dtype, cache_enabled=cache)


@contextlib.contextmanager
def _emulated_bf16_autocast(cache: bool):
    """bf16 autocast on a CPU without native bf16 (AVX2 only), oneDNN off inside: there torch 2.13 hands an LSTM
    under bf16 autocast to oneDNN, which has no bf16 LSTM on such a CPU and fails ("could not create a primitive
    descriptor for the LSTM forward propagation primitive": Luong with `train.precision: bf16` on a 2-core AVX2 EPYC);
    torch's own kernels run it. Its bf16 products take no oneDNN kernel on such a CPU anyway; the backward, recorded
    inside, follows the forward's kernels."""
    enabled = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=cache):
            yield
    finally:
        torch.backends.mkldnn.enabled = enabled


def training_attention_kernels(device: torch.device, dtype: torch.dtype | None):
    """The SDPA kernels a training step may use. On a CPU under bf16 autocast the flash kernel's backward ran ~9× its
    forward (a quarter of the demo's update) while SDPA's math kernel (matmuls and a softmax through oneDNN) trained
    the demo 1.24× faster; in fp32 the two were even (0.95×), and decoding, forward only, was even in bf16 too
    (results/attention-kernels-demo-*-cpu-bf16.json, docs/results.md "Tenth session"). Elsewhere (a GPU: flash or
    memory-efficient kernels) SDPA chooses."""
    if device.type == "cpu" and dtype == torch.bfloat16:
        return sdpa_kernel([SDPBackend.MATH])
    return contextlib.nullcontext()
