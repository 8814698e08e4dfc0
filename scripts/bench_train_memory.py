"""Peak memory of `nmt train` (the whole process tree, sampled from /proc), with a timeline, for one configuration.

    python scripts/bench_train_memory.py --config configs/cpu-base.yaml --set train.max_tokens=4096 \\
        --set train.time_budget_s=720 --out results/train-memory-cpu-base.json

Any `--set` is passed to `nmt train`, any `--env KEY=VALUE` to its environment; the run goes to a fresh temporary
directory. The record holds the peak RSS sampled every 0.5 s, the peak anonymous RSS (without the pages of
memory-mapped data files), the kernel's high-water mark of the training process's RSS (`peak_rss_hwm_gib`: no
sampling gap; within one update the RSS peaks for milliseconds) and a timeline. scripts/probe_phase_memory.py says
which phase of training makes the peak.

Where a peak is high, one variable at a time tells its cause apart (docs/results.md, "Training memory"): oneDNN's
kernel cache (`--env ONEDNN_PRIMITIVE_CACHE_CAPACITY=0`), glibc's per-thread arenas (`--env MALLOC_ARENA_MAX=2`),
the number of batch shapes (`--set train.length_multiple=8`), bf16 against fp32 (`--set train.precision=fp32`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from process_memory import TreeMemory
from results_record import write_record

GIB = 2**30


def cpu_capability() -> str:
    """The vector ISA torch dispatches to here (AVX2, AVX512, ...) and whether oneDNN runs bf16 natively."""
    import torch
    return f"{torch.backends.cpu.get_cpu_capability()}, mkldnn bf16 {torch.ops.mkldnn._is_mkldnn_bf16_supported()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment variable for the training process")
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    env = dict(os.environ, **dict(kv.split("=", 1) for kv in args.env))
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        command = [sys.executable, "-m", "nmt", "train", "--config", str(args.config), "--run-dir", str(run_dir),
                   "--data-dir", str(args.data_dir), *[f"--set={o}" for o in args.overrides]]
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   env=env)
        memory = TreeMemory(process.pid, interval_s=0.5)
        output = process.communicate()[0]
        memory.finish()
        high_water = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux; its largest child
        seconds = time.perf_counter() - started
        if process.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{output[-2000:]}")
        records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r.get("type") == "train"]
    peak_at_s = max(memory.timeline, key=lambda sample: sample[1])[0] if memory.timeline else None
    figures = {"wall_s": round(seconds, 1), "steps": train[-1]["step"] if train else 0,
               "peak_rss_gib": round(memory.peak / GIB, 3), "peak_anon_gib": round(memory.peak_anon / GIB, 3),
               "peak_rss_hwm_gib": round(high_water / GIB, 3),
               "peak_at_s": peak_at_s and round(peak_at_s, 1),
               "validations_step_s": [(r["step"], r["seconds"]) for r in records if r.get("type") == "valid"],
               "median_tokens_per_s": sorted(r["tokens_per_s"] for r in train)[len(train) // 2] if train else None,
               "timeline_s_rss_gib": [(round(t, 1), round(rss / GIB, 3)) for t, rss, _ in memory.timeline[::20]],
               "overrides": args.overrides, "env": args.env,
               "cpu_capability": cpu_capability(), "torch_threads_env": os.environ.get("OMP_NUM_THREADS")}
    print(json.dumps({k: v for k, v in figures.items() if k != "timeline_s_rss_gib"}))
    if args.out:
        write_record(args.out, figures=figures)


if __name__ == "__main__":
    main()
