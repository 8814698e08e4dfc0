"""Resident memory of the real training step on a CPU, with and without heap trimming, in one process.

    python scripts/probe_heap_trim.py --steps 300 [--cache 64] [--trim-every 10 | --trim-every -1]

`Trainer.train_step` on `configs/cpu-base.yaml`'s first batches (4,096 tokens, bf16); prints the resident set every
20 updates and the target tokens/s. --cache sets ONEDNN_PRIMITIVE_CACHE_CAPACITY in-process before the first matmul
(checks that setting it after importing torch takes effect); --trim-every k calls malloc_trim(0) every k updates, -1
the trainer's own HeapTrimmer after each. With k = 10 the samples (every 20) fall right after a trim: they are the
trough, not the peak between trims; scripts/bench_train_memory.py measures peaks.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nmt.config import load_config  # noqa: E402
from nmt.cpu_memory import resident_bytes  # noqa: E402
from nmt.data.batching import EpochPlan  # noqa: E402
from nmt.run_dir import Run  # noqa: E402
from nmt.train import Trainer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache")
    parser.add_argument("--trim-every", type=int, default=0)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    args = parser.parse_args()
    if args.cache is not None:
        os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = args.cache
    trim = ctypes.CDLL(None).malloc_trim
    cfg = load_config(Path(__file__).resolve().parent.parent / "configs/cpu-base.yaml",
                      overrides=["train.max_tokens=4096", "train.precision=bf16"])
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Run(Path(tmp)), args.data_dir, log=lambda *_: None)
        trainer.setup()
        plan = EpochPlan(trainer.train_data.lengths, len(trainer.train_data), 4096, 0, 0)
        started, tokens, samples = time.perf_counter(), 0, []
        for i in range(args.steps):
            tokens += trainer.train_step(trainer.feed.host_batches([plan[i]])).tgt_tokens
            if args.trim_every == -1:
                trainer.trim_heap()
            elif args.trim_every and (i + 1) % args.trim_every == 0:
                trim(0)
            if (i + 1) % 20 == 0:
                samples.append(round(resident_bytes() / 2**30, 2))
        print(f"cache={args.cache} trim_every={args.trim_every}: resident GiB every 20 updates {samples}, "
              f"{tokens / (time.perf_counter() - started):,.0f} target tokens/s")


if __name__ == "__main__":
    main()
