"""decode.no_repeat_ngram_size chosen on the valid split: BLEU, chrF and how many outputs repeat an n-gram of
words, for n in a grid (0: off), at the run's beam and at greedy. Never run this on test.

    python scripts/sweep_no_repeat.py --run runs/demo [--grid 0 2 3 4] [--out results/no-repeat-....json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nmt.data.dataset import load_references  # noqa: E402
from nmt.metrics import corpus_scores  # noqa: E402
from nmt.translator import Translator  # noqa: E402
from results_record import write_record  # noqa: E402


def repeats(text: str, n: int) -> bool:
    words = text.split()
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    return len(grams) != len(set(grams))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--grid", type=int, nargs="+", default=[0, 2, 3, 4])
    parser.add_argument("--out", type=Path, help="also write the figures as a results/ record")
    args = parser.parse_args()
    translator = Translator.from_run(args.run, device="cpu")
    sources, references = load_references(translator.trained_on, "valid")
    base, results = translator.decode, {}
    for beam in sorted({base.beam_size, 1}, reverse=True):
        for n in args.grid:
            translator.decode = dataclasses.replace(base, beam_size=beam, no_repeat_ngram_size=n)
            started = time.perf_counter()
            texts = [t.text for t in translator.translate(sources)]
            seconds = time.perf_counter() - started
            scores = corpus_scores(texts, references, target_lang=translator.target_lang)
            key = f"beam {beam}, no_repeat {n}"
            results[key] = {"bleu": scores["bleu"], "chrf": scores["chrf"],
                            "outputs_repeating_a_word_bigram": sum(repeats(t, 2) for t in texts),
                            "outputs_repeating_a_word_trigram": sum(repeats(t, 3) for t in texts),
                            "references_repeating_a_word_bigram": sum(repeats(r[0], 2) for r in references),
                            "sentences_per_s": round(len(sources) / seconds, 1)}
            print(f"{key:24} {json.dumps(results[key])}", flush=True)
    if args.out:
        write_record(args.out, run=str(args.run), split="valid", sentences=len(sources), grid=args.grid,
                     decode=dataclasses.asdict(base), results=results)


if __name__ == "__main__":
    main()
