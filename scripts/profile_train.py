"""Where a training step's CPU time goes: `torch.profiler` over real updates of a config, the top operators by
self time, as a results/ record. Run it from the tree to profile (e.g. an old commit's worktree, for before/after).

    python scripts/profile_train.py --config configs/demo.yaml --steps 20 --out results/profile-demo-cpu.json
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from torch.profiler import ProfilerActivity, profile

from nmt.config import load_config
from nmt.data.batching import token_batches
from nmt.run_dir import Run
from nmt.train import Trainer
from results_record import write_record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    cfg = load_config(args.config)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Run(Path(tmp)), args.data_dir, log=lambda *_: None)
        trainer.setup()
        batches = token_batches(trainer.train_data.src_lengths, trainer.train_data.tgt_lengths,
                                cfg.train.max_tokens, seed=0, epoch=0)
        for indices in batches[:args.warmup]:
            trainer.train_step(trainer.feed.host_batches([indices]))
        tokens, started = 0, time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for indices in batches[args.warmup:args.warmup + args.steps]:
                result = trainer.train_step(trainer.feed.host_batches([indices]))
                tokens += result.src_tokens + result.tgt_tokens
            float(result.loss_sum)
        elapsed = time.perf_counter() - started
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events)
    top = [{"op": e.key, "self_s": round(e.self_cpu_time_total / 1e6, 3),
            "share": round(e.self_cpu_time_total / total, 4), "calls": e.count} for e in events[:args.top]]
    for row in top:
        print(f"{row['share']:7.2%}  {row['self_s']:8.3f} s  {row['calls']:6d}  {row['op']}")
    print(f"{tokens / elapsed:,.0f} tokens/s under the profiler; self CPU time {total / 1e6:.2f} s")
    if args.out:
        write_record(args.out, figures={"config": str(args.config), "steps": args.steps,
                                        "self_cpu_s": round(total / 1e6, 3),
                                        "tokens_per_s_profiled": round(tokens / elapsed), "top": top})


if __name__ == "__main__":
    main()
