"""SDPA's own kernel choice against its math kernel in the real training step on this CPU, in one process.

    python scripts/probe_attention_kernels.py --precision bf16 [--config configs/demo.yaml] [--record results/X.json]

`Trainer.train_step` on the config's token-bucketed batches, alternating blocks of `--steps` updates with SDPA's
choice (flash on a CPU when no dropout or mask rules it out) and with its math kernel only, `--rounds` times (so
drift in the machine's speed hits both alike); prints target tokens/s per block and the median ratio. The trainer's
own choice (`nmt.device.training_attention_kernels`) is switched off here so that each block runs what it names.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

from nmt import train as train_module  # noqa: E402
from nmt.config import load_config  # noqa: E402
from nmt.run_dir import Run  # noqa: E402
from nmt.train import Trainer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_record import write_record  # noqa: E402

KERNELS = {"sdpa choice": contextlib.nullcontext, "math": lambda: sdpa_kernel([SDPBackend.MATH])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=Path(__file__).resolve().parent.parent / "configs/demo.yaml")
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--steps", type=int, default=40, help="updates per block")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    train_module.training_attention_kernels = lambda device, dtype: contextlib.nullcontext()
    cfg = load_config(args.config, overrides=[f"train.precision={args.precision}"])
    updates = args.warmup + 2 * args.rounds * args.steps
    figures = {name: [] for name in KERNELS}
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Run(Path(tmp)), args.data_dir, log=lambda *_: None)
        trainer.setup()
        plans = trainer.feed.update_plans(0, 0, updates)
        batches = [trainer.feed.host_batches(plan.micro_batches) for _, plan in zip(range(updates), plans)]
        for batch in batches[:args.warmup]:
            trainer.train_step(batch)
        blocks = iter(range(args.warmup, updates, args.steps))
        for _ in range(args.rounds):
            for name, kernels in KERNELS.items():
                start, tokens, began = next(blocks), 0, time.perf_counter()
                with kernels():
                    for batch in batches[start:start + args.steps]:
                        result = trainer.train_step(batch)
                        tokens += result.tgt_tokens
                float(result.loss_sum)  # the block's work is done (a no-op wait on a CPU)
                figures[name].append(round(tokens / (time.perf_counter() - began)))
    ratio = statistics.median(figures["math"]) / statistics.median(figures["sdpa choice"])
    summary = {"target_tokens_per_s": figures, "median_ratio_math": round(ratio, 3), "precision": args.precision,
               "config": str(args.config), "steps_per_block": args.steps, "rounds": args.rounds}
    print(summary)
    if args.record:
        write_record(args.record, figures=summary)


if __name__ == "__main__":
    main()
