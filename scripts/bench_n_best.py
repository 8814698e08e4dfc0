"""What an n-best list costs: beam-search sentences/s at n_best 1 and N on a run's split, repeats interleaved in
one process; with --baseline-tree, also the search of an older checkout (n_best 1), for a before/after ratio.

    git worktree add /tmp/base fa48372   # the tree before n-best lists
    python scripts/bench_n_best.py --run runs/demo --baseline-tree /tmp/base [--beam 5] [--n-best 1 5] \
        [--out results/n-best-decode-....json]

Times `Translator.translate` whole (tokenization and detokenization included); the baseline swaps in only the
old `nmt/search.py`, so the ratio is the search's. Run it while nothing else does.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nmt.translator as translator_module  # noqa: E402
from nmt.data.dataset import load_references  # noqa: E402
from nmt.search import Hypotheses  # noqa: E402
from nmt.translator import Translator  # noqa: E402
from results_record import write_record  # noqa: E402


def baseline_search(tree: Path):
    """`search` from another checkout's nmt/search.py, adapted to this tree's call and result."""
    spec = importlib.util.spec_from_file_location("baseline_search", tree / "nmt" / "search.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)

    def search(model, src, decode, attention=None, n_best=1, cancelled=None):
        found = module.search(model, src, decode, attention)
        return Hypotheses(found.tokens, found.scores, found.attention)

    return search


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--split", default="valid")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--n-best", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--baseline-tree", type=Path, help="an older checkout whose search to time at n_best 1")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, help="also write the figures as a results/ record")
    args = parser.parse_args()
    translator = Translator.from_run(args.run, device="cpu")
    sources, _ = load_references(translator.trained_on, args.split, args.sentences)
    ours = translator_module.search
    cases = {f"n_best {n}": (ours, n) for n in args.n_best}
    if args.baseline_tree:
        cases["baseline n_best 1"] = (baseline_search(args.baseline_tree), 1)

    translator.translate(sources, beam_size=args.beam)  # warm-up: every shape once
    rates: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, (search, n) in cases.items():
            translator_module.search = search
            started = time.perf_counter()
            translator.translate(sources, beam_size=args.beam, n_best=n)
            rates[name].append(len(sources) / (time.perf_counter() - started))
    translator_module.search = ours
    figures = {"run": str(args.run), "split": args.split, "sentences": len(sources), "beam": args.beam,
               "baseline_tree": str(args.baseline_tree) if args.baseline_tree else None,
               "threads": torch.get_num_threads(), "decode": translator.decode.__dict__,
               "sentences_per_s": {name: {"median": round(statistics.median(r), 1), "all": [round(x, 1) for x in r]}
                                   for name, r in rates.items()}}
    print(json.dumps(figures, indent=1))
    if args.out:
        write_record(args.out, **figures)

if __name__ == "__main__":
    main()
