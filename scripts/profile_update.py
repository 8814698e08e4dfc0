"""Where a warm training update's device time goes: `torch.profiler` over real updates of a config (a captured
update's replays included: their kernels are traced one by one), each kernel put in a category, as a results/ record.

    python scripts/profile_update.py --config configs/transformer.yaml --set train.max_tokens=32768 \
        [--set train.compile=true] [--device cuda] [--warmup 12] [--updates 20] [--out results/....json]

Issue 15 asks for 25% MFU; the H100 leases reached 18.3% with the update captured whole, where the host no longer
waits on anything. What is left is the device's own time, and this says where it goes: per update, the seconds of
matrix products, attention, normalization, the loss's softmax, dropout, the optimizer, copies and the rest; the
device's idle share between its kernels; and the ceiling if only the counted FLOPs' kernels (products and attention)
ran. On a CPU the same categories are taken over the operators' self time (no idle share: the host is the device).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).parent))
from results_record import write_record  # noqa: E402

# First match wins, in this order: a fused kernel that normalizes and drops out counts as normalization. The names
# are those of cuBLAS (nvjet, xmma, cutlass), PyTorch's flash and memory-efficient attention (flash, fmha), inductor
# (triton_poi/per/red/tem_...: the fused operators' names follow) and the CPU's aten operators.
CATEGORIES = (
    ("attention", ("flash", "fmha", "attention", "sdpa")),
    ("matmul", ("gemm", "nvjet", "xmma", "cutlass", "cublas", "triton_tem_fused_mm", "triton_tem_fused_addmm",
                "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_addmm")),
    ("optimizer", ("adam", "multi_tensor", "foreach")),
    # LayerNorm's weight and bias gradients are PyTorch's GammaBetaBackward kernel; dropout's scaling, masked_scale
    # (the H200's eager profile counted both as "other" and "elementwise" before they were named here)
    ("normalization", ("layer_norm", "layernorm", "rms_norm", "gammabeta")),
    ("softmax/loss", ("softmax", "nll_loss", "cross_entropy", "logsumexp")),
    ("dropout", ("dropout", "philox", "bernoulli", "masked_scale")),
    ("copy/fill", ("memcpy", "memset", "copy", "fill_", "fillfunctor", "_to_copy", "aten::to")),
    ("reduction", ("reduce", "triton_red", "triton_per", "aten::sum", "aten::norm")),
    ("elementwise", ("elementwise", "triton_poi", "aten::")),
)
# The categories whose kernels do the FLOPs the project counts (nmt.throughput.UpdateFlops).
COUNTED = ("matmul", "attention")


def category(name: str) -> str:
    lowered = name.lower()
    for label, keys in CATEGORIES:
        if any(key in lowered for key in keys):
            return label
    return "other"


def busy_seconds(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of (start, end) intervals: kernels on several streams overlapping count once."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def device_kernels(trace: dict) -> list[dict]:
    """The device's kernels, copies and fills of a Chrome trace as torch.profiler exports it (times in µs)."""
    return [e for e in trace.get("traceEvents", [])
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]


def breakdown(rows: list[tuple[str, float, int]], updates: int, top: int = 15) -> dict:
    """(name, seconds, calls) rows of one profiled window → per-update milliseconds, share and calls by category,
    and the `top` names."""
    by_category: dict[str, list] = defaultdict(lambda: [0.0, 0])  # [seconds, calls]
    by_name: dict[str, list] = defaultdict(lambda: [0.0, 0])
    for name, seconds, calls in rows:
        for sums in (by_category[category(name)], by_name[name]):
            sums[0] += seconds
            sums[1] += calls
    total = sum(seconds for _, seconds, _ in rows)

    def per_update(seconds: float, calls: int) -> dict:
        return {"ms_per_update": round(seconds * 1e3 / updates, 4), "share": round(seconds / total, 4),
                "per_update": round(calls / updates, 1)}
    ranked = sorted(by_name.items(), key=lambda item: -item[1][0])[:top]
    return {"ms_per_update": round(total * 1e3 / updates, 4),
            "categories": {label: per_update(*sums)
                           for label, sums in sorted(by_category.items(), key=lambda item: -item[1][0])},
            "top": [{"name": name[:160], "category": category(name), **per_update(*sums)} for name, sums in ranked]}


def profile_updates(cfg, data_dir: Path, warmup: int, updates: int) -> dict:
    from nmt.run_dir import Run
    from nmt.throughput import synchronize
    from nmt.train import Trainer

    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Run(Path(tmp) / "run"), data_dir, log=lambda *_: None)
        trainer.setup()
        plans = trainer.feed.update_plans(epoch=0, batch_in_epoch=0, updates=warmup + updates)
        for _, plan in zip(range(warmup), plans):  # compile, capture and every kernel choice made outside the window
            trainer.train_step(trainer.feed.host_batches(plan.micro_batches))
        # Collated before: only the update is timed.
        host = [trainer.feed.host_batches(plan.micro_batches) for plan in plans]
        synchronize(trainer.device)
        cuda = trainer.device.type == "cuda"
        flops, tokens = 0.0, 0
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as prof:
            started = time.perf_counter()
            for batches in host:
                result = trainer.train_step(batches)
                tokens += result.src_tokens + result.tgt_tokens
                flops += trainer.update_flops(result.src_tokens, result.tgt_tokens, result.sentences)
            synchronize(trainer.device)
            wall_s = time.perf_counter() - started
        figures = {"device": str(trainer.device), "updates": len(host), "wall_ms_per_update": wall_s * 1e3 / len(host),
                   "tokens_per_update": tokens / len(host), "counted_tflop_per_update": flops / len(host) / 1e12,
                   "peak_tflops": trainer.peak_flops / 1e12, "mfu_profiled": flops / wall_s / trainer.peak_flops}
        if cuda:
            path = Path(tmp) / "trace.json"
            prof.export_chrome_trace(str(path))
            kernels = device_kernels(json.loads(path.read_text()))
            if not kernels:  # e.g. a profiler build that traces no kernel launched by a CUDA graph's replay
                raise SystemExit("the profiler's trace holds no device kernels: no breakdown to make")
            rows = [(e["name"], e["dur"] / 1e6, 1) for e in kernels]
            span_s = (max(e["ts"] + e["dur"] for e in kernels) - min(e["ts"] for e in kernels)) / 1e6
            busy_s = busy_seconds([(e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6) for e in kernels])
            figures |= {"device_span_ms_per_update": span_s * 1e3 / len(host),
                        "device_busy_ms_per_update": busy_s * 1e3 / len(host),
                        "device_idle_share": 1 - busy_s / span_s}
        else:  # the operators' own (self) time: on a CPU the host does the arithmetic
            rows = [(e.key, e.self_cpu_time_total / 1e6, e.count) for e in prof.key_averages()
                    if e.self_cpu_time_total > 0]
        figures |= breakdown(rows, len(host))
        counted_s = sum(row["ms_per_update"] for label, row in figures["categories"].items() if label in COUNTED) / 1e3
        if counted_s:  # what the products and attention kernels alone achieve on the counted FLOPs
            figures["counted_kernels_tflops"] = figures["counted_tflop_per_update"] / counted_s
            figures["mfu_if_only_counted_kernels_ran"] = figures["counted_kernels_tflops"] / figures["peak_tflops"]
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}


def report(figures: dict) -> str:
    lines = [f"{figures['device']}: {figures['wall_ms_per_update']:.2f} ms an update under the profiler, "
             f"{figures['tokens_per_update']:,.0f} tokens, {figures['counted_tflop_per_update']:.3f} counted TFLOP, "
             f"MFU {figures['mfu_profiled']:.1%} of {figures['peak_tflops']:.4g} TFLOP/s"]
    if "device_busy_ms_per_update" in figures:
        lines.append(f"device busy {figures['device_busy_ms_per_update']:.2f} of "
                     f"{figures['device_span_ms_per_update']:.2f} ms an update "
                     f"(idle {figures['device_idle_share']:.1%})")
    if "mfu_if_only_counted_kernels_ran" in figures:
        lines.append(f"products and attention alone: {figures['counted_kernels_tflops']:.1f} TFLOP/s, MFU "
                     f"{figures['mfu_if_only_counted_kernels_ran']:.1%} if nothing else ran")
    lines += [f"{row['share']:7.1%} {row['ms_per_update']:9.3f} ms {row['per_update']:7.1f}x  {label}"
              for label, row in figures["categories"].items()]
    lines += [f"  {row['ms_per_update']:9.3f} ms {row['per_update']:7.1f}x  [{row['category']}] {row['name'][:100]}"
              for row in figures["top"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--device", default="auto")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--warmup", type=int, default=12, help="updates before the profiled ones (compile, capture)")
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--out", type=Path, help="also write the figures as a results/ record (JSON)")
    args = parser.parse_args()
    from nmt.config import load_config

    cfg = load_config(args.config, [*args.set, f"train.device={args.device}"])
    figures = profile_updates(cfg, args.data_dir, args.warmup, args.updates)
    print(report(figures))
    if args.out:
        write_record(args.out, config=str(args.config), overrides=args.set, warmup=args.warmup, figures=figures)


if __name__ == "__main__":
    main()
