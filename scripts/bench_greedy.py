"""Greedy decoding, as validation runs it: sentences/s per decode batch size and per compaction cadence (how many
steps finished rows stay in the batch between host syncs; `nmt.search._default_compact_every` picks it per device).

    python scripts/bench_greedy.py --run runs/demo [--device cuda] [--batch-sizes 128 1024] [--compact-every 1 8]
        [--sentences 600] [--repeats 3] [--out results/greedy-....json]

Settings alternate within each repeat (one process, one machine), so the ratios hold even on a busy machine; the
figure is the median. Every setting must give the same translations (checked). On a GPU the host syncs of one pass
are counted too (torch.cuda.set_sync_debug_mode("warn")).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

import nmt.search
from nmt.data.dataset import load_references
from nmt.data.prepare import find_prepared
from nmt.translator import Translator

sys.path.insert(0, str(Path(__file__).parent))
from results_record import write_record  # noqa: E402


def host_syncs(translate) -> int:
    """Synchronizing CUDA calls made by one call of `translate` (0 on a CPU, where none can be counted)."""
    if not torch.cuda.is_available():
        return 0
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            translate()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True)
    parser.add_argument("--data-dir", default="data")
    parser.add_argument("--split", default="valid")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sentences", type=int, default=600)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[128])
    parser.add_argument("--compact-every", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    translators = {size: Translator.from_run(args.run, device=args.device, decode_overrides={"batch_size": size})
                   for size in args.batch_sizes}
    some = next(iter(translators.values()))
    sources = load_references(find_prepared(some.config.data, args.data_dir), args.split)[0][:args.sentences]
    settings = [(size, every) for size in args.batch_sizes for every in args.compact_every]
    speeds: dict[tuple[int, int], list[float]] = {s: [] for s in settings}
    outputs, syncs = {}, {}
    for repeat in range(args.repeats):
        for size, every in settings:
            nmt.search._default_compact_every = lambda device, every=every: every  # the setting under test
            translate = lambda t=translators[size]: [r.text for r in t.translate(sources, beam_size=1)]  # noqa: E731
            if repeat == 0:
                translate()  # warm-up: kernels chosen, caches allocated
                syncs[(size, every)] = host_syncs(translate)
            started = time.perf_counter()
            outputs[(size, every)] = translate()
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            speeds[(size, every)].append(len(sources) / (time.perf_counter() - started))
    reference = outputs[settings[0]]
    assert all(out == reference for out in outputs.values()), "a setting changed the translations"
    rows = [{"batch_size": size, "compact_every": every, "sentences_per_s": round(statistics.median(speeds[s]), 1),
             "runs": [round(v, 1) for v in speeds[s]], "host_syncs_per_pass": syncs[s]}
            for s in settings for size, every in [s]]
    print(f"| batch | compact every | sentences/s ({len(sources)} {args.split}, {args.device}) | host syncs |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['batch_size']} | {row['compact_every']} | {row['sentences_per_s']:,.1f} | "
              f"{row['host_syncs_per_pass']} |")
    if args.out:
        write_record(args.out, device_used=str(some.device), sentences=len(sources), split=args.split,
                     identical_translations=True, figures=rows)


if __name__ == "__main__":
    main()
