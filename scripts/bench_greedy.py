"""Greedy decoding, as validation runs it: sentences/s per decode batch size and per compaction cadence (how many
steps finished rows stay in the batch between host syncs; `nmt.search._default_compact_every` picks it per device).

    python scripts/bench_greedy.py --run runs/demo [--device cuda] [--batch-sizes 128 1024] [--compact-every 1 8]
        [--cudnn-attention off on] [--sentences 600] [--repeats 3] [--out results/greedy-....json]
    python scripts/bench_greedy.py --run runs/demo --old <checkout>   # this tree's search vs an older one's,
                                                                       # greedy and beam 5, default settings

Settings alternate within each repeat (one process, one machine), so the ratios hold even on a busy machine; the
figure is the median. Each setting's share of translations identical to the first setting's is reported (1.0
expected; see `identical_share`). On a GPU the host syncs of one pass are counted too
(torch.cuda.set_sync_debug_mode("warn")), and SDPA's cuDNN kernels can be switched on for a setting
(`--cudnn-attention off on`; nmt keeps them off: nmt.device.avoid_cudnn_attention): cuDNN builds a graph for every
new shape, so each setting's first pass, cold, is reported beside the warm median, and validation, whose model and
so whose shapes change every time, pays what the cold pass pays.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

import nmt.search
import nmt.translator
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


def identical_share(outputs: list[str], reference: list[str]) -> float:
    """How many translations a setting shares with the reference setting's. The compaction cadence and the batch
    size must not change what search does; on a CPU they change no number either (1.0). On a GPU another batch
    shape may pick another bf16 kernel and a near-tie may then resolve the other way: a share below 1.0 there is
    that, a share far below it a bug."""
    return sum(a == b for a, b in zip(outputs, reference)) / max(1, len(reference))


def load_old_search(checkout: Path):
    spec = importlib.util.spec_from_file_location("old_search", checkout / "nmt" / "search.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)  # its imports resolve to this tree's nmt (models, config: unchanged API)
    return module.search


def old_against_this(args, translator: Translator, sources: list[str]) -> list[dict]:
    """nmt.search of an older checkout against this tree's, alternating in one process, same translations asserted."""
    engines = {"old": load_old_search(args.old), "this": nmt.search.search}
    speeds, outputs = {}, {}
    for repeat in range(args.repeats):
        for beam in (1, 5):
            for name, search in engines.items():
                nmt.translator.search = search  # what Translator.translate calls
                if repeat == 0:
                    translator.translate(sources[:50], beam_size=beam)  # warm-up
                outputs[(beam, name)], seconds = timed(
                    lambda: [r.text for r in translator.translate(sources, beam_size=beam)], args.device)
                speeds.setdefault((beam, name), []).append(len(sources) / seconds)
    nmt.translator.search = engines["this"]
    rows = []
    for beam in (1, 5):
        assert outputs[(beam, "old")] == outputs[(beam, "this")], f"beam {beam}: the translations differ"
        old, new = (statistics.median(speeds[(beam, n)]) for n in ("old", "this"))
        rows.append({"beam": beam, "old_sentences_per_s": round(old, 1), "this_sentences_per_s": round(new, 1),
                     "ratio": round(new / old, 3), "old_runs": [round(v, 1) for v in speeds[(beam, "old")]],
                     "this_runs": [round(v, 1) for v in speeds[(beam, "this")]]})
        print(f"beam {beam}: old {old:,.1f} → this {new:,.1f} sentences/s ({new / old:.3f}×), same translations")
    return rows


def timed(translate, device: str) -> tuple[list[str], float]:
    """One pass's translations and its seconds (the GPU's work included)."""
    started = time.perf_counter()
    texts = translate()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return texts, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True)
    parser.add_argument("--data-dir", default="data")
    parser.add_argument("--split", default="valid")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sentences", type=int, default=600)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[128])
    parser.add_argument("--compact-every", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--cudnn-attention", nargs="+", choices=("off", "on"), default=["off"],
                        help="SDPA's cuDNN kernels off (nmt's choice) and/or on, per setting")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--old", type=Path, help="a checkout of older code: its search against this tree's")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.old:
        translator = Translator.from_run(args.run, device=args.device)
        prepared = find_prepared(translator.config.data, args.data_dir, translator.trained_on)
        sources = load_references(prepared, args.split)[0]
        rows = old_against_this(args, translator, sources[:args.sentences])
        if args.out:
            write_record(args.out, old_checkout=str(args.old), sentences=args.sentences, split=args.split,
                         identical_translations=True, figures=rows)
        return

    translators = {size: Translator.from_run(args.run, device=args.device, decode_overrides={"batch_size": size})
                   for size in args.batch_sizes}
    some = next(iter(translators.values()))
    prepared = find_prepared(some.config.data, args.data_dir, some.trained_on)
    sources = load_references(prepared, args.split)[0][:args.sentences]
    settings = [(size, every, cudnn) for cudnn in args.cudnn_attention for size in args.batch_sizes
                for every in args.compact_every]
    speeds: dict[tuple, list[float]] = {s: [] for s in settings}
    outputs, syncs, cold = {}, {}, {}
    for repeat in range(args.repeats):
        for setting in settings:
            size, every, cudnn = setting
            nmt.search._default_compact_every = lambda device, every=every: every  # the setting under test
            if hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
                torch.backends.cuda.enable_cudnn_sdp(cudnn == "on")
            translate = lambda t=translators[size]: [r.text for r in t.translate(sources, beam_size=1)]  # noqa: E731
            if repeat == 0:  # the warm-up, timed: kernels chosen (cuDNN's graphs built), caches allocated
                cold[setting] = timed(translate, args.device)[1]
                syncs[setting] = host_syncs(translate)
            outputs[setting], seconds = timed(translate, args.device)
            speeds[setting].append(len(sources) / seconds)
    reference = outputs[settings[0]]
    rows = [{"batch_size": size, "compact_every": every, "cudnn_attention": cudnn,
             "sentences_per_s": round(statistics.median(speeds[s]), 1), "runs": [round(v, 1) for v in speeds[s]],
             "first_pass_s": round(cold[s], 3), "host_syncs_per_pass": syncs[s],
             "same_as_first_setting": round(identical_share(outputs[s], reference), 4)}
            for s in settings for size, every, cudnn in [s]]
    print(f"| batch | compact every | cuDNN attention | sentences/s ({len(sources)} {args.split}, {args.device}) "
          "| first pass s | host syncs | same translations as the first row |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['batch_size']} | {row['compact_every']} | {row['cudnn_attention']} | "
              f"{row['sentences_per_s']:,.1f} | {row['first_pass_s']:.2f} | {row['host_syncs_per_pass']} | "
              f"{row['same_as_first_setting']:.2%} |")
    if args.out:
        write_record(args.out, device_used=str(some.device), sentences=len(sources), split=args.split,
                     identical_translations=all(row["same_as_first_setting"] == 1.0 for row in rows), figures=rows)


if __name__ == "__main__":
    main()
