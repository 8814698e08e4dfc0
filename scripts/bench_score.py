"""Scoring given pairs (`nmt score`): pairs/s and the references' perplexity on a run's split, and the perplexity
of the same sources with their references shuffled (what a corpus filter has to tell apart).

    python scripts/bench_score.py --run runs/demo [--split test] [--out results/score-demo-test-....json]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nmt.data.dataset import load_references  # noqa: E402
from nmt.translator import Translator  # noqa: E402
from results_record import write_record  # noqa: E402


def perplexity(scored) -> float:
    return math.exp(-sum(h.log_prob for h in scored) / sum(h.pieces for h in scored))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--split", default="test")
    parser.add_argument("--out", type=Path, help="also write the figures as a results/ record")
    args = parser.parse_args()
    translator = Translator.from_run(args.run, device="cpu")
    sources, all_references = load_references(translator.trained_on, args.split)
    references = [refs[0] for refs in all_references]
    translator.score(sources[:200], references[:200])  # warm-up
    started = time.perf_counter()
    true = translator.score(sources, references)
    seconds = time.perf_counter() - started
    shuffled = references[:]
    random.Random(0).shuffle(shuffled)
    wrong = translator.score(sources, shuffled)
    figures = {"run": str(args.run), "split": args.split, "pairs": len(sources), "threads": torch.get_num_threads(),
               "precision": translator.describe()["precision"], "seconds": round(seconds, 2),
               "pairs_per_s": round(len(sources) / seconds, 1), "target_pieces": sum(h.pieces for h in true),
               "perplexity_references": round(perplexity(true), 3),
               "perplexity_shuffled_references": round(perplexity(wrong), 3),
               "pairs_scoring_above_their_shuffled_pair": sum(a.score > b.score for a, b in zip(true, wrong))}
    print(json.dumps(figures, indent=1))
    if args.out:
        write_record(args.out, **figures)


if __name__ == "__main__":
    main()
