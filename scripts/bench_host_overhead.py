"""The host's share of an eager training update: how many operators one update dispatches, and how long the host
takes to dispatch them when the math itself is negligible, for a config's layer structure.

    python scripts/bench_host_overhead.py --config configs/transformer.yaml --record results/host-overhead.json

Why: on a GPU an eager update cannot finish before the host has issued every kernel, whatever the GPU's speed.
The model keeps the config's layers, heads and vocabulary (so the same operators run) but shrinks its widths
(`--embed-dim`, `--ff-dim` or `--hidden-size`) and its batch (`--max-tokens`, one batch as wide as the real
batches' median), so that the time per update here is the host's: Python, the dispatcher, autograd and the
optimizer's bookkeeping. (On the 2-core EPYC in fp32: 18 ms at width 16, 15 ms at the defaults' 8, 66 ms at 64
with 256 tokens; results/host-overhead-transformer-by-width-cpu-bf16.json.)
Against the real model's FLOPs per update at the config's `train.max_tokens`, that floor bounds the MFU an eager
update can reach on a GPU of a given peak, and says how many tokens an update needs before the host stops being the
limit. A CPU-side estimate: a GPU's host adds a kernel launch (a few µs) to most operators, and its CPU may be
faster or slower than this one. A recurrent model runs one step per position, so its count follows the batch's
widths: the timed batch is the tiny plan's closest to the real batches' median widths.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from nmt.config import load_config
from nmt.data.batching import EpochPlan
from nmt.run_dir import Run
from nmt.throughput import GPU_PEAK_TFLOPS, UpdateFlops, peak_tflops, synchronize
from nmt.train import Trainer

sys.path.insert(0, str(Path(__file__).parent))
from results_record import write_record  # noqa: E402


class OperatorCount(TorchDispatchMode):
    """Every aten operator dispatched, split into views (metadata only: no kernel on a GPU) and the rest."""

    def __init__(self):
        super().__init__()
        self.computing, self.views = Counter(), 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.is_view:
            self.views += 1
        else:
            self.computing[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def real_update_flops(cfg, data_dir: Path) -> tuple[float, dict]:
    """FLOPs of one update of the config's own model on its mean token-bucketed batch (epoch 0's plan)."""
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Run(Path(tmp)), data_dir, log=lambda *_: None)
        data = trainer.train_data
        plan = EpochPlan(data.lengths, len(data), cfg.train.max_tokens, cfg.train.seed, 0)
        batches = [trainer.feed.host_batches([plan[i]])[0] for i in range(len(plan))]
        src = sum(b.src_tokens for b in batches) / len(batches)
        tgt = sum(b.tgt_tokens for b in batches) / len(batches)
        sentences = sum(b.sentences for b in batches) / len(batches)
    flops = UpdateFlops(trainer.model)(round(src), round(tgt), round(sentences))
    widths = sorted((b.src.shape[1], b.tgt_in.shape[1]) for b in batches)
    return flops, {"mean_src_tokens": round(src, 1), "mean_tgt_tokens": round(tgt, 1),
                   "mean_sentences": round(sentences, 1), "batches_per_epoch": len(batches),
                   "median_widths": widths[len(widths) // 2]}


def batch_like(trainer: Trainer, plan: EpochPlan, widths: tuple[int, int]):
    """The tiny plan's batch whose (source, target) widths come closest to `widths`: a recurrent model runs one
    step per position, so its operator count follows the widths, not the token count."""
    best, best_gap = None, None
    for i in range(len(plan)):
        batch = trainer.feed.host_batches([plan[i]])
        gap = abs(batch[0].src.shape[1] - widths[0]) + abs(batch[0].tgt_in.shape[1] - widths[1])
        if best_gap is None or gap < best_gap:
            best, best_gap = batch, gap
        if gap == 0:
            break
    return best


def time_updates(cfg, data_dir: Path, warmup: int, steps: int, widths: tuple[int, int]
                 ) -> tuple[list[float], OperatorCount, torch.device, tuple[int, int]]:
    """Seconds of each of `steps` updates after `warmup`, and the operators of one more, all on one batch as wide as
    the real ones (`batch_like`): a new shape every update would time oneDNN's kernel creation on a CPU (its bf16
    matmuls are generated per shape), which a GPU's libraries do not pay; the operators are the same."""
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Run(Path(tmp)), data_dir, log=lambda *_: None)
        trainer.setup()
        plan = EpochPlan(trainer.train_data.lengths, len(trainer.train_data), cfg.train.max_tokens, cfg.train.seed, 0)
        batch = batch_like(trainer, plan, widths)
        for _ in range(warmup):
            trainer.train_step(batch)
        seconds = []
        for _ in range(steps):
            synchronize(trainer.device)
            started = time.perf_counter()
            trainer.train_step(batch)
            synchronize(trainer.device)  # the GPU's share is tiny at these widths: what is left is the host's
            seconds.append(time.perf_counter() - started)
        with OperatorCount() as count:
            trainer.train_step(batch)
    return seconds, count, trainer.device, (batch[0].src.shape[1], batch[0].tgt_in.shape[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=Path("configs/transformer.yaml"))
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--embed-dim", type=int, help="default: 8 per attention head for a Transformer (a GPU's "
                        "fused attention kernels want head sizes in multiples of 8: at 1 a GPU ran SDPA's math path, "
                        "bmm and padding the real model never runs), 8 for the recurrent models")
    parser.add_argument("--ff-dim", type=int, default=16, help="the Transformer's")
    parser.add_argument("--hidden-size", type=int, default=8, help="the recurrent models'")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--precision", default="bf16", help="bf16: the autocast casts a GPU run makes too")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda: the floor with the kernel launches included")
    parser.add_argument("--threads", type=int, default=1, help="one thread: the host's own dispatch, no fan-out")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="another config override")
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    # The floor of the eager update on token buckets, whatever the config's GPU path (transformer.yaml packs rows and
    # captures its updates since the twenty-fifth session); --set may still choose otherwise.
    eager = ["train.pack_length=0", "train.cuda_graph=false", "train.compile=false"]
    full = load_config(args.config, [*eager, *args.set])
    transformer = full.model.arch == "transformer"
    width = f"model.ff_dim={args.ff_dim}" if transformer else f"model.hidden_size={args.hidden_size}"
    embed_dim = args.embed_dim or (8 * full.model.num_heads if transformer else 8)
    overrides = [*eager, f"model.embed_dim={embed_dim}", width, f"train.max_tokens={args.max_tokens}",
                 f"train.precision={args.precision}", f"train.device={args.device}", *args.set]
    flops, real_batch = real_update_flops(full, args.data_dir)
    seconds, count, device, widths = time_updates(load_config(args.config, overrides), args.data_dir, args.warmup,
                                                  args.steps, real_batch["median_widths"])
    host_s = statistics.median(seconds)
    computing = sum(count.computing.values())
    # On a GPU its own bf16 peak (the trainer's table); on a CPU the estimate is for an H100, the target.
    peak = peak_tflops(device, 0.0, torch.bfloat16)[0] * 1e12 if device.type == "cuda" \
        else GPU_PEAK_TFLOPS["H100"] * 1e12
    ceiling = flops / (host_s * peak)
    tokens_ceiling = (real_batch["mean_src_tokens"] + real_batch["mean_tgt_tokens"]) / host_s  # as the log counts
    tokens_for_25 = full.train.max_tokens * 0.25 / ceiling  # the update's math grows with its tokens, the host's not
    print(f"{args.config}: {computing} computing operators + {count.views} views per update (a batch of widths "
          f"{widths}, the real batches' median {tuple(real_batch['median_widths'])}); host "
          f"{host_s * 1e3:.1f} ms per update on {args.device} ({computing / host_s / 1e3:.0f}k operators/s, "
          f"{args.threads} thread(s))")
    print(f"real model at max_tokens {full.train.max_tokens}: {flops / 1e12:.2f} TFLOP per update -> eager MFU at most "
          f"{ceiling:.1%} of {peak / 1e12:.0f} TFLOP/s (bf16) and {tokens_ceiling:,.0f} tokens/s; 25% needs >= "
          f"{tokens_for_25:,.0f} tokens per update")
    if args.record:
        write_record(args.record, figures={
            "config": str(args.config), "shrunk_to": overrides, "device": args.device, "threads": args.threads,
            "timed_batch_widths": list(widths),
            "host_ms_per_update_median": round(host_s * 1e3, 2),
            "host_ms_per_update_range": [round(min(seconds) * 1e3, 2), round(max(seconds) * 1e3, 2)],
            "computing_operators_per_update": computing, "view_operators_per_update": count.views,
            "top_operators": dict(count.computing.most_common(15)),
            "real_model_tflop_per_update": round(flops / 1e12, 3), "real_batch": real_batch,
            "peak_tflops_bf16": round(peak / 1e12), "eager_mfu_ceiling": round(ceiling, 4),
            "eager_tokens_per_s_ceiling": round(tokens_ceiling),
            "tokens_per_update_for_25pct_mfu": round(tokens_for_25)},
            note="The eager host floor with the kernel launches, on this GPU's host." if device.type == "cuda" else
                 "A CPU-side estimate of the eager host floor; a GPU's host also launches a kernel per computing "
                 "operator (a few µs each) and may be faster or slower than this CPU.")


if __name__ == "__main__":
    main()
