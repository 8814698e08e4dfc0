"""Peak resident memory and speed of CPU training under one heap policy, in one process (200 updates by default).

    python scripts/probe_heap_policy.py [--onednn-cache 16] [--mmap-threshold 4194304] [--trim-threshold 1073741824]
                                        [--trim-before-larger] [--config configs/demo.yaml]

`Trainer.train_step` on `configs/cpu-base.yaml`'s batches (4,096 tokens, bf16; or `--config`'s own) with the
trainer's heap trimmer after each update, as its loop runs it; after `--warmup` updates the kernel's high-water mark
is reset (/proc/self/clear_refs), and the peak over the timed updates, target tokens/s, the number of trims and the
page faults per update (first touches of memory the process got from the kernel) are printed.
The variables, one at a time: oneDNN's kernel cache capacity (set before the first matmul); a fixed glibc mmap
threshold (`mallopt(M_MMAP_THRESHOLD)`: blocks from that size up are mmapped and unmapped when freed, and the
threshold no longer rises); a fixed glibc trim threshold (`mallopt(M_TRIM_THRESHOLD)`: how much free memory at the
heap's top `free` leaves before it shrinks the heap; it no longer follows the mmap threshold); trimming also before
an update whose padded size exceeds every update's since the last trim (its blocks would not fit the freed ones).
Run the variants one after another, alternating, nothing else running: the peak varies by ~±0.05 GiB from run to
run.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from process_memory import peak_rss_bytes, reset_peak_rss

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--onednn-cache", type=int, help="ONEDNN_PRIMITIVE_CACHE_CAPACITY (default: the trainer's)")
    parser.add_argument("--mmap-threshold", type=int, help="bytes; default: glibc's dynamic threshold")
    parser.add_argument("--trim-threshold", type=int, help="bytes; default: glibc's dynamic threshold")
    parser.add_argument("--trim-before-larger", action="store_true")
    parser.add_argument("--config", type=Path, help="default: configs/cpu-base.yaml at 4,096 tokens in bf16")
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    args = parser.parse_args()
    if args.onednn_cache is not None:
        os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = str(args.onednn_cache)
    if args.mmap_threshold:
        ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, args.mmap_threshold)
    if args.trim_threshold:
        ctypes.CDLL(None).mallopt(M_TRIM_THRESHOLD, args.trim_threshold)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from nmt.config import load_config
    from nmt.cpu_memory import resident_bytes
    from nmt.run_dir import Run
    from nmt.train import Trainer

    cfg = load_config(args.config) if args.config else load_config(
        Path(__file__).resolve().parent.parent / "configs/cpu-base.yaml",
        overrides=["train.max_tokens=4096", "train.precision=bf16"])
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Run(Path(tmp)), args.data_dir, log=lambda *_: None)
        trainer.setup()
        trimmer = trainer.trim_heap
        since_trim = {"trough": None, "largest": 0}
        malloc_trim = trimmer.malloc_trim

        def tracked_trim(pad: int) -> int:
            done = malloc_trim(pad)
            since_trim.update(trough=resident_bytes(), largest=0)
            return done

        trimmer.malloc_trim = tracked_trim
        total = args.warmup + args.updates
        plans = [plan for _, plan in zip(range(total), trainer.feed.update_plans(0, 0, total))]
        tokens, began = 0, 0.0
        for i, plan in enumerate(plans):
            if i == args.warmup:
                reset_peak_rss()
                tokens, began, trims_before = 0, time.perf_counter(), trimmer.trims
                faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            batches = trainer.feed.host_batches(plan.micro_batches)
            size = sum(b.src.numel() + b.tgt_in.numel() for b in batches)
            if (args.trim_before_larger and since_trim["trough"] is not None and size > since_trim["largest"]
                    and resident_bytes() > since_trim["trough"] + trimmer.slack_bytes):
                trimmer(force=True)
            tokens += trainer.train_step(batches).tgt_tokens
            since_trim["largest"] = max(since_trim["largest"], size)
            trimmer()
        figures = {"config": str(args.config or "configs/cpu-base.yaml"),
                   "onednn_cache": os.environ.get("ONEDNN_PRIMITIVE_CACHE_CAPACITY"),
                   "mmap_threshold": args.mmap_threshold, "trim_threshold": args.trim_threshold,
                   "trim_before_larger": args.trim_before_larger,
                   "peak_gib": round(peak_rss_bytes() / 2**30, 3),
                   "target_tokens_per_s": round(tokens / (time.perf_counter() - began)),
                   "trims": trimmer.trims - trims_before, "updates": args.updates,
                   "page_faults_per_update": round((resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                                                    - faults_before) / args.updates)}
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
