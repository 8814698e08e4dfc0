"""What sampling gives a back-translation pipeline, on a run's split: BLEU against the references (sampled text is
noisier on purpose), how varied the output is (distinct bigrams over all bigrams), the model's mean log-probability
per piece of what it produced, and sentences/s; beam search and greedy search beside the samplers.

    python scripts/bench_sampling.py --run runs/demo [--split valid] [--out results/sampling-....json]

Whether sampled back-translations then train a better model (Edunov et al. 2018) is not measured here.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nmt.data.dataset import load_references  # noqa: E402
from nmt.metrics import corpus_bleu  # noqa: E402
from nmt.translator import Translator  # noqa: E402
from results_record import write_record  # noqa: E402

SETTINGS = {"beam 5": {"beam_size": 5}, "greedy": {"beam_size": 1},
            "top-k 10": {"beam_size": 1, "sampling_topk": 10},
            "top-p 0.9": {"beam_size": 1, "sampling_topk": 0, "sampling_topp": 0.9},
            "unrestricted": {"beam_size": 1, "sampling_topk": 0}}


def distinct_bigrams(texts: list[str]) -> float:
    bigrams = [tuple(words[i:i + 2]) for words in (t.split() for t in texts) for i in range(len(words) - 1)]
    return len(set(bigrams)) / max(1, len(bigrams))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--split", default="valid")
    parser.add_argument("--out", type=Path, help="also write the figures as a results/ record")
    args = parser.parse_args()
    translator = Translator.from_run(args.run, device="cpu")
    sources, references = load_references(translator.trained_on, args.split)
    base = translator.decode
    translator.translate(sources[:100])  # warm-up
    results = {}
    for name, settings in SETTINGS.items():
        translator.decode = dataclasses.replace(base, **settings)
        started = time.perf_counter()
        output = translator.translate(sources)
        seconds = time.perf_counter() - started
        texts = [t.text for t in output]
        pieces = sum(t.hypotheses[0].pieces for t in output if t.hypotheses)
        results[name] = {"bleu": corpus_bleu(texts, references, translator.target_lang),
                         "distinct_bigrams": round(distinct_bigrams(texts), 4),
                         "log_prob_per_piece": round(sum(t.hypotheses[0].log_prob for t in output if t.hypotheses)
                                                     / pieces, 3),
                         "sentences_per_s": round(len(sources) / seconds, 1)}
        print(f"{name:14} {json.dumps(results[name])}", flush=True)
    figures = {"run": str(args.run), "split": args.split, "sentences": len(sources),
               "threads": torch.get_num_threads(), "settings": SETTINGS, "results": results}
    if args.out:
        write_record(args.out, **figures)


if __name__ == "__main__":
    main()
