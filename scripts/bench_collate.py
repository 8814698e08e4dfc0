"""Host time to build training batches on the real prepared data.

With `--old`: `collate` of this tree against the sentence loop of an older commit, in one run (the older code
imported from a checkout of it):

    git worktree add /tmp/old ff0b427
    python scripts/bench_collate.py --data-dir data --old /tmp/old --max-tokens 1500 8192 --out results/x.json

Without: what the trainer's prefetch thread does per update for each batch layout (tight batches, lengths rounded to
8 as `train.length_multiple: 8` pads them, packed rows of 128 as `train.pack_length: 128` under compile builds
them): the epoch's plan (seconds, once an epoch), one batch's collation (ms), to hold against a GPU's update time,
and the share of the epoch's positions (both sides) that hold a token:

    python scripts/bench_collate.py --config configs/transformer.yaml --max-tokens 8192 32768 --out results/x.json
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

from nmt.config import load_config
from nmt.data.batching import EpochPlan, PackedRows, StaticShapes, collate, collate_packed, token_batches
from nmt.data.dataset import load_arrays
from nmt.data.prepare import find_prepared

sys.path.insert(0, str(Path(__file__).parent))
from results_record import write_record  # noqa: E402


def load_old_collate(checkout: Path):
    spec = importlib.util.spec_from_file_location("old_batching", checkout / "nmt" / "data" / "batching.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)  # its imports resolve to this tree's nmt (dataset, tokenizer: unchanged API)
    return module.collate


def time_per_batch(build, arrays, batches, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for indices in batches:
            build(arrays, indices)
        best = min(best, (time.perf_counter() - started) / len(batches))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--config", type=Path, default=Path("configs/demo.yaml"))
    parser.add_argument("--old", type=Path, help="a checkout of the commit to compare with (else: the layouts)")
    parser.add_argument("--max-tokens", type=int, nargs="+", default=[1500, 8192])
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    arrays = load_arrays(find_prepared(load_config(args.config).data, args.data_dir), "train")
    rows = compare_with_old(arrays, args) if args.old else time_layouts(arrays, args)
    if args.out:
        write_record(args.out, old_checkout=str(args.old) if args.old else None, figures=rows)


def time_layouts(arrays, args) -> list[dict]:
    rows = []
    for max_tokens in args.max_tokens:
        layouts = {"tight": ({}, lambda indices: collate(arrays, indices)),
                   "length_multiple_8": ({"length_multiple": 8},
                                         lambda indices: collate(arrays, indices, StaticShapes(8, max_tokens))),
                   "pack_length_128": ({"pack_length": 128},
                                       lambda indices: collate_packed(arrays, indices,
                                                                      PackedRows(128, max_tokens, static=True)))}
        for name, (plan_args, build) in layouts.items():
            started = time.perf_counter()
            plan = EpochPlan(arrays.lengths, len(arrays), max_tokens, seed=0, epoch=0, **plan_args)
            batches = [plan[i] for i in range(len(plan))]
            plan_s = time.perf_counter() - started
            timed = batches[:args.batches]
            built = [build(b) for b in batches]
            non_pad = sum(b.src_tokens + b.tgt_tokens for b in built)
            rows.append({"max_tokens": max_tokens, "layout": name, "batches_per_epoch": len(batches),
                         "non_pad_share": round(non_pad / sum(b.src.numel() + b.tgt_in.numel() for b in built), 4),
                         "plan_s": round(plan_s, 3),
                         "ms_per_batch": round(time_per_batch(lambda _, b: build(b), arrays, timed, args.repeats)
                                               * 1e3, 3)})
            print(rows[-1], flush=True)
    return rows


def compare_with_old(arrays, args) -> list[dict]:
    old_collate, rows = load_old_collate(args.old), []
    for max_tokens in args.max_tokens:
        batches = token_batches(arrays.src_lengths, arrays.tgt_lengths, max_tokens, seed=0, epoch=0)[:args.batches]
        for a, b in zip(batches[:20], batches[:20]):
            assert collate(arrays, a).targets.equal(old_collate(arrays, b).targets)  # the same batches
        old = time_per_batch(old_collate, arrays, batches, args.repeats)
        new = time_per_batch(collate, arrays, batches, args.repeats)
        rows.append({"max_tokens": max_tokens, "sentences_per_batch": round(sum(map(len, batches)) / len(batches), 1),
                     "old_ms_per_batch": round(old * 1e3, 3), "new_ms_per_batch": round(new * 1e3, 3),
                     "speedup": round(old / new, 2)})
        print(rows[-1], flush=True)
    return rows


if __name__ == "__main__":
    main()
