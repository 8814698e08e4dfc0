"""Training throughput: tokens/s over a logging window and model FLOPs utilization (MFU, as in nanoGPT).

MFU = achieved model FLOP/s ÷ the device's peak. Model FLOPs per update come from the architecture
(`EncoderDecoder.forward_flops`: weights applied to each source and target token, attention over the mean
lengths, the output projection) times 3 for forward + backward; recomputation or padding is not counted.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

# Dense 16-bit (bf16, and fp16 where no bf16) tensor-core peaks, no sparsity, from the vendors' data sheets; SXM
# parts unless the name says otherwise.
GPU_PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "H100 PCIe": 756.0, "H100 NVL": 835.0, "A100": 312.0,
                   "L40S": 362.0, "A10G": 125.0, "L4": 121.0, "RTX 4090": 165.0, "RTX 3090": 71.0, "V100": 125.0,
                   "T4": 65.0}
SIXTEEN_BIT = (torch.bfloat16, torch.float16)


def gpu_peak_tflops(device: torch.device) -> float | None:
    name = torch.cuda.get_device_name(device)
    # "NVIDIA H100 80GB HBM3" → H100; the longest matching key wins (H100 before H10...).
    matches = [key for key in GPU_PEAK_TFLOPS if key in name]
    return GPU_PEAK_TFLOPS[max(matches, key=len)] if matches else None


def measured_matmul_tflops(device: torch.device, size: int = 1024, seconds: float = 0.3,
                           dtype: torch.dtype | None = None, windows: int = 6) -> float:
    """Matmul FLOP/s actually reached here in the precision training uses (`dtype`: the autocast type, None for
    fp32, TF32 or not as torch is set): one measurement at start-up, the practical peak (a GPU's for fp32 training
    or when it is missing from the table). The fastest of `windows` short windows, not their mean: a peak, and a
    process that shares the cores for a moment (a 2-core CPU's make demo beside a code scan read 0.067 TFLOP/s in
    one 0.3-s window, and logged up to 142% MFU against it) slows some windows, not all. On a CPU the products are
    `size`² or smaller, as large as fit a window (`fitting_size`)."""
    # A private generator: drawing from the global one would shift dropout masks after an exact resume.
    generator = torch.Generator(device).manual_seed(0)
    dtype = dtype or torch.float32

    def operands(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        return tuple(torch.randn(n, n, device=device, generator=generator).to(dtype) for _ in range(2))

    # A GPU runs the matmuls asynchronously: without a sync per burst the loop would queue seconds of work in its
    # 0.3 s and then wait for all of it at start-up.
    size, burst = (4 * size, 8) if device.type == "cuda" else (size, 1)
    if device.type != "cuda" and size // 4 >= 64:
        small = size // 4
        a, b = operands(small)
        a @ b  # warm-up
        started = time.perf_counter()
        a @ b
        size = fitting_size(size, small, time.perf_counter() - started, seconds / windows)
    a, b = operands(size)
    a @ b  # warm-up
    synchronize(device)
    fastest = 0.0
    for _ in range(windows):
        runs, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds / windows:
            for _ in range(burst):
                a @ b
            synchronize(device)
            runs += burst
        fastest = max(fastest, 2 * size**3 * runs / (time.perf_counter() - started) / 1e12)
    return fastest


def fitting_size(size: int, small: int, small_seconds: float, window: float) -> int:
    """The largest of size, size/2, size/4... (down to `small`) whose product, timed at `small` in `small_seconds`
    and growing as the cube of the size, fits one window. A CPU without native bf16 emulates it: one 1024² bf16
    product took 2.4 s on a 2-core AVX2 EPYC, so that the windows of 1024² products held every bf16 run's start-up
    for 17 s; at 256², 0.025 s."""
    while size > small and small_seconds * (size / small) ** 3 > window:
        size //= 2
    return max(size, small)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_tflops(device: torch.device, configured: float = 0.0, dtype: torch.dtype | None = None) -> tuple[float, str]:
    """(peak TFLOP/s, where it came from): the configured value, the GPU table, or a matmul measured in the
    training precision (`dtype`, the autocast type; None: fp32) — bf16 training is not measured against fp32."""
    if configured > 0:
        return configured, "train.peak_tflops"
    name = "fp32" if dtype is None else str(dtype).removeprefix("torch.")
    if device.type == "cuda" and dtype in SIXTEEN_BIT:  # fp32 training runs at a fraction of the table: measured
        peak = gpu_peak_tflops(device)
        if peak is not None:
            return peak, f"{name} peak of {torch.cuda.get_device_name(device)}"
    return measured_matmul_tflops(device, dtype=dtype), f"measured {name} matmul"


MEASURED_AGAIN = 3  # log windows after which a measured peak is measured once more


@dataclass
class TrainingPeak:
    """The peak that training's MFU is reported against (`peak_tflops`). One measured here is measured again after
    each of the first MEASURED_AGAIN log windows, and the fastest reading stands: a process that shared the cores
    during the start-up measurement read it low for the whole run (a 2-core make demo beside a linter's first minute
    logged ~120% MFU against it)."""

    tflops: float
    source: str
    device: torch.device
    dtype: torch.dtype | None
    measurements_left: int = 0

    @classmethod
    def of(cls, device: torch.device, configured: float, dtype: torch.dtype | None) -> "TrainingPeak":
        tflops, source = peak_tflops(device, configured, dtype)
        return cls(tflops, source, device, dtype, MEASURED_AGAIN if source.startswith("measured") else 0)

    def measure_again(self) -> float | None:
        """One more measurement where one is due; the peak it replaces where it read more than 5% above it (worth
        saying: MFU falls by as much from here on), else None (a closer reading is kept too, in silence)."""
        if not self.measurements_left:
            return None
        self.measurements_left -= 1
        before, reading = self.tflops, measured_matmul_tflops(self.device, dtype=self.dtype)
        self.tflops = max(before, reading)
        return before if reading > 1.05 * before else None


class UpdateFlops:
    """Training FLOPs (forward + backward = 3 × forward) of one update over these tokens, from the model's
    `forward_flops` at the batch's mean lengths. Every architecture's per-token counts are affine in the two mean
    lengths, so three evaluations at start-up give them for any batch (no walk over the parameters per update)."""

    def __init__(self, model):
        (s0, t0), (s1, t1), (s2, t2) = (model.forward_flops(*lengths) for lengths in ((0.0, 0.0), (1.0, 0.0),
                                                                                      (0.0, 1.0)))
        self.src = (s0, s1 - s0, s2 - s0)  # per source token: constant, × mean source length, × mean target length
        self.tgt = (t0, t1 - t0, t2 - t0)

    def __call__(self, src_tokens: int, tgt_tokens: int, sentences: int) -> float:
        sentences = max(sentences, 1)
        src_len, tgt_len = src_tokens / sentences, tgt_tokens / sentences
        per_src = self.src[0] + self.src[1] * src_len + self.src[2] * tgt_len
        per_tgt = self.tgt[0] + self.tgt[1] * src_len + self.tgt[2] * tgt_len
        return 3.0 * (per_src * src_tokens + per_tgt * tgt_tokens)


PHASES = ("data", "forward", "backward", "sync", "optimizer")  # sync: the ranks agree on stop and time flags


class StepTimer:
    """Seconds per phase of each update, summed over a logging window: host clocks on a CPU (where work is
    synchronous), CUDA events on a GPU (read once per window, when the log line syncs anyway).

    On a GPU the host's own seconds per phase come too (`host_<phase>_s`: collating waits and kernel launches), and
    on every device `host_blocked_s`, the host's seconds waiting for the device at the window's reads (the loss, the
    non-finite record, these events): much of the window there means the device is the bottleneck; little, that the
    host is on the critical path (issue 15's question). On a CPU the work is done before a read, so it is ~0."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.host_totals = dict.fromkeys(PHASES, 0.0)
        self.blocked_s = 0.0
        self.pending: list[tuple[str, object, object]] = []
        self._phase, self._start, self._host_start = None, None, None

    def phase(self, name: str | None) -> None:
        """End the running phase (if any) and start `name` (None: stop timing until the next phase)."""
        host_now = time.perf_counter()
        now = host_now
        if self.cuda:
            now = torch.cuda.Event(enable_timing=True)
            now.record()
        if self._phase is not None:
            self.pending.append((self._phase, self._start, now))
            if self.cuda:  # on a CPU the phases are host clocks already
                self.host_totals[self._phase] += host_now - self._host_start
        self._phase, self._start, self._host_start = name, now, host_now

    @contextlib.contextmanager
    def blocked(self) -> Iterator[None]:
        """Count the enclosed seconds as the host waiting for the device (around a read of a device value)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.blocked_s += time.perf_counter() - started

    def report(self) -> dict:
        """{phase: seconds} since the last report (on a GPU with the host's seconds), and the host's blocked seconds."""
        if self.cuda and self.pending:
            with self.blocked():
                self.pending[-1][2].synchronize()
        for name, start, end in self.pending:
            self.totals[name] += start.elapsed_time(end) / 1000 if self.cuda else end - start
        figures = {f"{name}_s": round(value, 3) for name, value in self.totals.items()}
        if self.cuda:
            figures.update({f"host_{name}_s": round(value, 3) for name, value in self.host_totals.items()})
        figures["host_blocked_s"] = round(self.blocked_s, 3)
        self.totals, self.host_totals = dict.fromkeys(PHASES, 0.0), dict.fromkeys(PHASES, 0.0)
        self.pending, self.blocked_s = [], 0.0
        return figures


@dataclass
class ThroughputWindow:
    """Loss, tokens and FLOPs since the last log line; `report` returns the figures and starts a new window."""

    peak_flops: float
    loss_sum: float | torch.Tensor = 0.0  # summed on the device during training, read at `report`
    src_tokens: int = 0
    tgt_tokens: int = 0
    padded_tokens: int = 0  # positions computed, padding included (source and target)
    flops: float = 0.0
    started: float = field(default_factory=time.perf_counter)
    # Per update, whether it was applied (a device bool: False, skipped as non-finite under train.nonfinite_loss
    # skip) and its target tokens: kept as they come, read once at `report` (no device work per update).
    applied: list[torch.Tensor | bool] = field(default_factory=list)
    update_tgt_tokens: list[int] = field(default_factory=list)

    def add(self, loss_sum: float | torch.Tensor, src_tokens: int, tgt_tokens: int, flops: float,
            padded_tokens: int = 0, applied: torch.Tensor | bool = True) -> None:
        self.loss_sum += loss_sum
        self.src_tokens += src_tokens
        self.tgt_tokens += tgt_tokens
        self.padded_tokens += padded_tokens
        self.flops += flops
        self.applied.append(applied)
        self.update_tgt_tokens.append(tgt_tokens)

    def report(self, world_size: int) -> dict:
        """The window's figures: its loss per target token of the updates applied (None if it skipped them all: a
        skipped update adds no loss, and its tokens made the loss look lower, 0 for a window of them alone), how
        many updates it made and skipped, tokens/s and MFU."""
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        applied = torch.stack([torch.as_tensor(a) for a in self.applied]).cpu().tolist() if self.applied else []
        applied_tokens = sum(tokens for tokens, kept in zip(self.update_tgt_tokens, applied) if kept)
        # Every rank processed about as many tokens as this one.
        # Two reads of the device (the loss sum, the applied flags), at a log line only.
        figures = {"loss": float(self.loss_sum) / applied_tokens if applied_tokens else None,
                   "updates": len(applied), "skipped_updates": applied.count(False),
                   "tokens_per_s": (self.src_tokens + self.tgt_tokens) * world_size / elapsed,
                   "padded_tokens_per_s": self.padded_tokens * world_size / elapsed,
                   "mfu": self.flops / elapsed / self.peak_flops if self.peak_flops else 0.0,
                   "window_s": elapsed}
        self.loss_sum, self.src_tokens, self.tgt_tokens, self.padded_tokens, self.flops = 0.0, 0, 0, 0, 0.0
        self.applied, self.update_tgt_tokens = [], []
        self.started = time.perf_counter()
        return figures
