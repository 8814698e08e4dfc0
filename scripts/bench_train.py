"""Training throughput and MFU of each architecture, measured on the real training step (`Trainer.train_step`).

    python scripts/bench_train.py --data-dir data --steps 30 [--device cuda] [--embed-dim 256 --hidden-size 256]
    python scripts/bench_train.py --config configs/transformer.yaml --archs transformer   # a shipped config's shape

Each step is a full update (forward under autocast, backward, clipping, AdamW) on real token-bucketed batches,
after warm-up steps; the figures are the median of `--windows` windows of the timed steps (3: as a training log's
windows are read), each listed in the record. MFU is relative to the trainer's peak: the GPU table's under
bf16/fp16 autocast, else a matmul measured in the training precision.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from nmt.config import Config, load_config
from nmt.data.batching import EpochPlan
from nmt.data.prefetch import Prefetcher
from nmt.run_dir import Run
from nmt.throughput import synchronize
from nmt.train import Trainer

sys.path.insert(0, str(Path(__file__).parent))
from results_record import write_record  # noqa: E402

ARCHS = {"seq2seq": {"arch": "seq2seq"}, "bahdanau": {"arch": "bahdanau"},
         "luong": {"arch": "luong", "input_feeding": False}, "luong+feed": {"arch": "luong", "input_feeding": True},
         "transformer": {"arch": "transformer"}}


def bench(cfg: Config, data_dir: Path, steps: int, warmup: int, warmup_epoch: bool = False, windows: int = 3) -> dict:
    """tokens/s and MFU over `steps` updates after `warmup` ones, as the median of `windows` equal windows (each ended
    by one wait for the device, as a training log window is); with `warmup_epoch`, the warm-up is every batch of
    epoch 0 (every batch shape the plan makes: cuBLAS/cuDNN choices and any compilation done) and the timed
    updates come from epoch 1."""
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Run(Path(tmp)), data_dir, log=lambda *_: None)
        trainer.setup()
        data, t = trainer.train_data, trainer.cfg.train  # the settings in force (a CPU drops a capture's layout)

        def plan(epoch: int) -> list:  # the training loop's own plan (token buckets, static widths or packed rows)
            batches = EpochPlan(data.lengths, len(data), t.max_tokens, 0, epoch, length_multiple=t.length_multiple,
                                pack_length=t.pack_length)
            return [batches[i] for i in range(len(batches))]
        if warmup_epoch:
            first = plan(0)
            batches, warmup = first + plan(1)[:steps], len(first)
        else:
            batches = plan(0)[:warmup + steps]
        steps = len(batches) - warmup  # an epoch shorter than asked times what it has
        if steps < 1:
            raise SystemExit(f"{len(batches)} batches leave no update to time after {warmup} warm-up ones")
        windows = max(1, min(windows, steps))
        ends = {warmup + (steps * (k + 1)) // windows for k in range(windows)}  # the update index after each window
        measured, splits, tokens, flops, started = [], [], 0, 0.0, None
        setup_done = time.perf_counter()

        def window_end() -> float:  # one wait for the device, as a log line's read is; the step split read after it
            with trainer.timer.blocked():
                synchronize(trainer.device)
            splits.append(trainer.timer.report())
            return time.perf_counter()
        # As the training loop does: the next batches collated (and pinned) by a background thread meanwhile.
        with Prefetcher(([indices] for indices in batches), trainer.feed.host_batches) as updates:
            for i, (_, micro_batches) in enumerate(updates):
                if i == warmup or i in ends:
                    now = window_end()
                    if i == warmup:  # the warm-up updates, compilation included
                        warmup_s, warmup_tokens = now - setup_done, tokens
                        splits.clear()
                    else:
                        measured.append((tokens, flops, now - started))
                    tokens, flops, started = 0, 0.0, now
                result = trainer.train_step(micro_batches)  # asynchronous on a GPU: waited for at a window's end
                tokens += result.src_tokens + result.tgt_tokens
                flops += trainer.update_flops(result.src_tokens, result.tgt_tokens, result.sentences)
        measured.append((tokens, flops, window_end() - started))
        params = sum(p.numel() for p in trainer.model.parameters())
        per_window = [{"tokens_per_s": n / s, "mfu": f / s / trainer.peak_flops, "tflops": f / s / 1e12,
                       "window_s": s, **split} for (n, f, s), split in zip(measured, splits)]
        median = {key: statistics.median(w[key] for w in per_window) for key in ("tokens_per_s", "mfu", "tflops")}
        return {**median, "params": params, "device": str(trainer.device),
                "peak_tflops": trainer.peak_flops / 1e12, "warmup_s": warmup_s, "warmup_tokens": warmup_tokens,
                "timed_s": sum(s for *_, s in measured), "steps": steps,
                # each window's figures and step split (device phases; on a GPU the host's, and its blocked seconds)
                "windows": [{k: round(v, 4) for k, v in w.items()} for w in per_window]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--config", type=Path, help="take model and training settings from this config")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--warmup-epoch", action="store_true",
                        help="warm up over a whole epoch (every batch shape), then time epoch 1's first --steps")
    parser.add_argument("--max-tokens", type=int, default=3000)
    parser.add_argument("--embed-dim", type=int, default=256)
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--windows", type=int, default=3,
                        help="report the median of this many equal windows of the timed steps (as training logs do)")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--archs", nargs="*", default=list(ARCHS))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--record", type=Path, help="also write the figures as a results/ record (JSON)")
    args = parser.parse_args()
    sets = [*args.set, "train.compile=true"] if args.compile else args.set  # validated with compile on
    base = load_config(args.config, sets) if args.config else load_config(None, [*sets,
        f"model.embed_dim={args.embed_dim}", f"model.hidden_size={args.hidden_size}",
        f"model.num_layers={args.num_layers}", f"model.ff_dim={4 * args.embed_dim}",
        f"train.max_tokens={args.max_tokens}"], warn=lambda *_: None)
    # --compile or --set train.compile=true alike (the lease's steps once set it the second way, and benched eager)
    train_cfg = dataclasses.replace(base.train, device=args.device, precision=args.precision,
                                    compile=args.compile or base.train.compile, eval_max_sentences=1)
    print("| architecture | parameters | tokens/s | achieved TFLOP/s | MFU | device, threads, max_tokens |")
    print("|---|---|---|---|---|---|")
    rows = []
    for name in args.archs:
        model = dataclasses.replace(base.model, **ARCHS[name]) if not args.config else base.model
        cfg = dataclasses.replace(base, model=model, train=train_cfg)
        r = bench(cfg, args.data_dir, args.steps, args.warmup, args.warmup_epoch, args.windows)
        print(f"| {name} | {r['params'] / 1e6:.2f}M | {r['tokens_per_s']:,.0f} | {r['tflops']:.3f} | "
              f"{r['mfu']:.1%} of {r['peak_tflops']:.3g} | {r['device']}, {torch.get_num_threads()}, "
              f"{cfg.train.max_tokens} |", flush=True)
        rows.append({"architecture": name, "max_tokens": cfg.train.max_tokens,
                     "length_multiple": cfg.train.length_multiple,
                     "pack_length": cfg.train.pack_length, "compile": cfg.train.compile,
                     "compile_mode": cfg.train.compile_mode, "threads": torch.get_num_threads(),
                     **{k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}})
    if args.record:
        write_record(args.record, config=str(args.config) if args.config else None, overrides=args.set,
                     steps=args.steps, warmup="epoch" if args.warmup_epoch else args.warmup, figures=rows)


if __name__ == "__main__":
    main()
