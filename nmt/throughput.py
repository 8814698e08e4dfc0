"""Training throughput: tokens/s over a logging window and model FLOPs utilization (MFU, as in nanoGPT).

MFU = achieved model FLOP/s ÷ the device's peak. Model FLOPs per update come from the architecture
(`EncoderDecoder.forward_flops`: weights applied to each source and target token, attention over the mean
lengths, the output projection) times 3 for forward + backward; recomputation or padding is not counted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

# Dense bf16 tensor-core peaks (no sparsity), from the vendors' data sheets.
GPU_PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 125.0, "L4": 121.0,
                   "RTX 4090": 165.0, "RTX 3090": 71.0, "V100": 125.0, "T4": 65.0}


def gpu_peak_tflops(device: torch.device) -> float | None:
    name = torch.cuda.get_device_name(device)
    # "NVIDIA H100 80GB HBM3" → H100; the longest matching key wins (H100 before H10...).
    matches = [key for key in GPU_PEAK_TFLOPS if key in name]
    return GPU_PEAK_TFLOPS[max(matches, key=len)] if matches else None


def measured_matmul_tflops(device: torch.device, size: int = 1024, seconds: float = 0.3) -> float:
    """Matmul FLOP/s actually reached here (fp32 on a CPU, bf16 on a GPU missing from the table): one
    measurement at start-up, the practical peak."""
    # A private generator: drawing from the global one would shift dropout masks after an exact resume.
    generator = torch.Generator(device).manual_seed(0)
    dtype, size = (torch.bfloat16, 4 * size) if device.type == "cuda" else (torch.float32, size)
    a = torch.randn(size, size, device=device, generator=generator).to(dtype)
    b = torch.randn(size, size, device=device, generator=generator).to(dtype)
    a @ b  # warm-up
    runs, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        a @ b
        runs += 1
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return 2 * size**3 * runs / (time.perf_counter() - started) / 1e12


def peak_tflops(device: torch.device, configured: float = 0.0) -> tuple[float, str]:
    """(peak TFLOP/s, where it came from): the configured value, the GPU table, or a CPU matmul measurement."""
    if configured > 0:
        return configured, "train.peak_tflops"
    if device.type == "cuda":
        peak = gpu_peak_tflops(device)
        if peak is not None:
            return peak, f"bf16 peak of {torch.cuda.get_device_name(device)}"
    return measured_matmul_tflops(device), "measured matmul"


def update_flops(model, src_tokens: int, tgt_tokens: int, sentences: int) -> float:
    """Training FLOPs (forward + backward = 3 × forward) of one update over these tokens."""
    sentences = max(sentences, 1)
    per_src, per_tgt = model.forward_flops(src_tokens / sentences, tgt_tokens / sentences)
    return 3.0 * (per_src * src_tokens + per_tgt * tgt_tokens)


@dataclass
class ThroughputWindow:
    """Loss, tokens and FLOPs since the last log line; `report` returns the figures and starts a new window."""

    peak_flops: float
    loss_sum: float = 0.0
    src_tokens: int = 0
    tgt_tokens: int = 0
    flops: float = 0.0
    started: float = field(default_factory=time.perf_counter)

    def add(self, loss_sum: float, src_tokens: int, tgt_tokens: int, flops: float) -> None:
        self.loss_sum += loss_sum
        self.src_tokens += src_tokens
        self.tgt_tokens += tgt_tokens
        self.flops += flops

    def report(self, world_size: int) -> dict:
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        # Every rank processed about as many tokens as this one.
        figures = {"loss": self.loss_sum / max(self.tgt_tokens, 1),
                   "tokens_per_s": (self.src_tokens + self.tgt_tokens) * world_size / elapsed,
                   "mfu": self.flops / elapsed / self.peak_flops if self.peak_flops else 0.0}
        self.loss_sum, self.src_tokens, self.tgt_tokens, self.flops = 0.0, 0, 0, 0.0
        self.started = time.perf_counter()
        return figures
