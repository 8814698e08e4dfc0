"""What `train.compile_scope` costs at start and gives per update: the whole model compiled, or each repeated layer.

    python scripts/bench_compile_scope.py --config configs/transformer.yaml --set train.pack_length=128 \
        [--device cuda] [--scopes eager model layers] [--updates 8] [--out results/compile-scope-....json]

Each scope trains in a process of its own, with a compile cache of its own (a fresh TORCHINDUCTOR_CACHE_DIR and
TRITON_CACHE_DIR): what a first run on a new machine pays, as time-to-BLEU counts it. Through the trainer's own
update (`Trainer.train_step`, with train.cuda_graph if the config sets it) on the real batches: the first update's
seconds (tracing and code generation, and a captured update's eager runs and capture), then the median of the next
`--updates` updates, each waited for. `eager` is the same run with train.compile off.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results_record import write_record  # noqa: E402

SCOPES = ("eager", "model", "layers")


def scope_settings(scope: str) -> list[str]:
    return ["train.compile=false"] if scope == "eager" else ["train.compile=true", f"train.compile_scope={scope}"]


def measure(config: Path, settings: list[str], data_dir: Path, updates: int) -> dict:
    """In this process: the first update's seconds and the median of the next `updates` (each waited for)."""
    import torch

    from nmt.config import load_config
    from nmt.run_dir import Run
    from nmt.throughput import synchronize
    from nmt.train import Trainer

    cfg = load_config(config, settings)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Run(Path(tmp) / "run"), data_dir, log=lambda *_: None)
        trainer.setup()
        seconds, losses = [], []
        for plan in trainer.feed.update_plans(epoch=0, batch_in_epoch=0, updates=updates + 1):
            started = time.perf_counter()
            result = trainer.train_step(trainer.feed.host_batches(plan.micro_batches))
            synchronize(trainer.device)
            seconds.append(time.perf_counter() - started)
            losses.append(float(result.loss_sum) / result.tgt_tokens)
    return {"first_update_s": round(seconds[0], 2), "update_ms": round(1000 * statistics.median(seconds[1:]), 1),
            "device": str(trainer.device), "threads": torch.get_num_threads(),
            "precision": "fp32" if trainer.dtype is None else str(trainer.dtype).removeprefix("torch."),
            "losses": [round(loss, 4) for loss in losses]}


def in_fresh_process(args, scope: str) -> dict:
    cache = Path(tempfile.mkdtemp(prefix="compile-cache-"))
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "TRITON_CACHE_DIR": str(cache / "triton")}
    command = [sys.executable, __file__, "--worker", "--config", str(args.config), "--data-dir", str(args.data_dir),
               "--updates", str(args.updates), *[f"--set={s}" for s in [*args.set, *scope_settings(scope)]]]
    try:
        out = subprocess.run(command, capture_output=True, text=True, env=env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if out.returncode:
        raise SystemExit(f"{scope}: failed:\n{out.stderr[-2000:]}")
    return {"scope": scope, **json.loads(out.stdout.splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--device", default="auto")
    parser.add_argument("--scopes", nargs="+", choices=SCOPES, default=list(SCOPES))
    parser.add_argument("--updates", type=int, default=8, help="warm updates timed after the first")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.config, args.set, args.data_dir, args.updates)))
        return
    args.set = [*args.set, f"train.device={args.device}"]
    print("| scope | first update s | update ms (median) | device, threads, precision |")
    print("|---|---|---|---|")
    figures = []
    for scope in args.scopes:
        row = in_fresh_process(args, scope)
        figures.append(row)
        print(f"| {scope} | {row['first_update_s']:.2f} | {row['update_ms']:.1f} | {row['device']}, "
              f"{row['threads']}, {row['precision']} |", flush=True)
    if args.out:
        write_record(args.out, config=str(args.config), overrides=args.set, updates=args.updates, figures=figures)


if __name__ == "__main__":
    main()
