"""`nmt evaluate --compare`'s paired bootstrap: peak memory and seconds of sacrebleu's own PairedTest against nmt's
(nmt/metrics.py: one resample scored at a time), each in a fresh process, on synthetic systems of a test set's size;
their results must be equal.

    python scripts/bench_compare.py [--sentences 24000] [--systems 3] [--samples 1000] [--out results/....json]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_record import write_record  # noqa: E402


def synthetic_systems(sentences: int, systems: int) -> tuple[list[list[str]], list[str]]:
    """References of 12 words from a 3,000-word vocabulary, and systems that replace 30%, 32%, ... of their words."""
    draw = random.Random(0)
    words = [f"w{i}" for i in range(3000)]
    references = [" ".join(draw.choices(words, k=12)) for _ in range(sentences)]
    return [[" ".join(w if draw.random() > 0.3 + 0.02 * i else draw.choice(words) for w in r.split())
             for r in references] for i in range(systems)], references


def measure(implementation: str, sentences: int, systems: int, samples: int) -> dict:
    """One implementation's results, seconds and peak RSS (ru_maxrss: this process alone)."""
    hypotheses, references = synthetic_systems(sentences, systems)
    from nmt.metrics import BLEU, paired_bootstrap  # imported before the clock starts, as sacrebleu is

    started = time.perf_counter()
    if implementation == "sacrebleu":
        from sacrebleu.significance import PairedTest

        _, scores = PairedTest([(str(i), h) for i, h in enumerate(hypotheses)], {"BLEU": BLEU()}, [references],
                               test_type="bs", n_samples=samples)()
        results = [(r.score, float(r.mean), float(r.ci), r.p_value) for r in scores["BLEU"]]
    else:
        results = [(r.score, r.mean, r.ci, r.p_value)
                   for r in paired_bootstrap(BLEU(), hypotheses, [references], samples)]
    return {"seconds": round(time.perf_counter() - started, 2),
            "max_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3), "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=24000)
    parser.add_argument("--systems", type=int, default=3)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--implementation", choices=["sacrebleu", "nmt"], help=argparse.SUPPRESS)  # the child's
    parser.add_argument("--out", type=Path, help="also write the figures as a results/ record")
    args = parser.parse_args()
    if args.implementation:
        print(json.dumps(measure(args.implementation, args.sentences, args.systems, args.samples)))
        return
    figures = {"sentences": args.sentences, "systems": args.systems, "samples": args.samples}
    for implementation in ("sacrebleu", "nmt"):
        child = subprocess.run([sys.executable, __file__, "--implementation", implementation, "--sentences",
                                str(args.sentences), "--systems", str(args.systems), "--samples", str(args.samples)],
                               capture_output=True, text=True, check=True)
        figures[implementation] = json.loads(child.stdout.splitlines()[-1])
    figures["equal_results"] = figures["sacrebleu"]["results"] == figures["nmt"]["results"]
    print(json.dumps(figures, indent=1))
    if args.out:
        write_record(args.out, **figures)
    if not figures["equal_results"]:
        sys.exit("the two implementations disagree")


if __name__ == "__main__":
    main()
