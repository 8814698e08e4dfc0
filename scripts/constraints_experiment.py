"""What lexical constraints do to a trained model's translations of a split: the free beam search, then the same
beam held to one word of each sentence's reference (Post & Vilar 2018's test of constrained decoding: what an
oracle glossary gives), drawn three ways: any word of 4+ letters (`any_word`), a word the free translation missed
(`missed_word`: the terminology fix), and two neighbouring words of letters (`two_words`: a phrase of several pieces
met in order); a sentence with none keeps no constraint. BLEU and chrF with sacrebleu's
paired bootstrap against the free search, the share of translations that hold their word, and sentences/s (one
after the other on this machine: compare them as ratios). The words come from the references, so BLEU rises by
construction; the figures say by how much, and at what speed.

    python scripts/constraints_experiment.py --run runs/demo [--split valid] [--beam 5] [--out results/....json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nmt.data.dataset import load_references  # noqa: E402
from nmt.evaluate import compare, phrases_held  # noqa: E402
from nmt.translator import Translator  # noqa: E402
from results_record import write_record  # noqa: E402

SEED = 20180601  # the draw of words is the same in every run of the script


def words(text: str) -> list[str]:
    """The reference's words that a constraint can name whole: letters only, four or more (no elision, no digits)."""
    return [w for w in text.split() if w.isalpha() and len(w) >= 4]


def word_pairs(text: str) -> list[str]:
    """Two neighbouring words of the reference, letters only (a phrase the search must meet piece after piece)."""
    tokens = text.split()
    return [f"{a} {b}" for a, b in zip(tokens, tokens[1:]) if a.isalpha() and b.isalpha()]


def drawn(candidates: list[list[str]], rng: random.Random) -> list[list[str]]:
    """One word per sentence from its candidates (a sentence with none: no constraint)."""
    return [[rng.choice(found)] if found else [] for found in candidates]


def timed(translator: Translator, sources: list[str], constraints=None) -> tuple[list[str], float]:
    translator.translate(sources[:50], constraints=constraints[:50] if constraints else None)  # new shapes
    started = time.perf_counter()
    texts = [t.text for t in translator.translate(sources, constraints=constraints)]
    return texts, time.perf_counter() - started


def held(texts: list[str], constraints: list[list[str]], target_lang: str) -> float:
    """The share of the constrained sentences whose translation holds its word (or words) as words, counted as
    `nmt evaluate --constraints` counts them (bois-toi holds bois)."""
    return phrases_held(texts, constraints, target_lang)["held_share"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--split", default="valid")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--out", type=Path, help="also write the figures as a results/ record")
    args = parser.parse_args()
    translator = Translator.from_run(args.run, device="cpu")
    translator.decode = dataclasses.replace(translator.decode, beam_size=args.beam)
    sources, references = load_references(translator.trained_on, args.split)
    free, free_s = timed(translator, sources)
    rng = random.Random(SEED)
    any_word = drawn([words(refs[0]) for refs in references], rng)
    missed_word = drawn([[w for w in words(refs[0]) if w not in text.split()] for refs, text in
                         zip(references, free)], rng)
    two_words = drawn([word_pairs(refs[0]) for refs in references], rng)
    constraints_of = {"any_word": any_word, "missed_word": missed_word, "two_words": two_words}
    outputs = {"free": (free, free_s)}
    for name, constraints in constraints_of.items():
        outputs[name] = timed(translator, sources, constraints)
    table = compare([(name, texts) for name, (texts, _) in outputs.items()], references,
                    target_lang=translator.target_lang)
    holding = {name: {"constrained_sentences": sum(map(bool, constraints)),
                      "share_holding_the_word": held(outputs[name][0], constraints, translator.target_lang),
                      "free_share_holding_it": held(free, constraints, translator.target_lang)}
               for name, constraints in constraints_of.items()}
    figures = {
        "run": str(args.run), "checkpoint": str(translator.checkpoint), "split": args.split, "beam": args.beam,
        "sentences": len(sources), "threads": torch.get_num_threads(),
        "precision": translator.describe()["precision"], "seed": SEED, "bleu_signature": table.signature,
        "systems": [{**row, "sentences_per_s": round(len(sources) / outputs[row["system"]][1], 1),
                     **holding.get(row["system"], {})} for row in table.rows],
        "examples": [{"source": sources[i], "reference": references[i][0], "free": free[i],
                      "constraint": missed_word[i], "constrained": outputs["missed_word"][0][i]}
                     for i in range(len(sources)) if missed_word[i]][:5],
    }
    print(json.dumps(figures, indent=1, ensure_ascii=False))
    if args.out:
        write_record(args.out, **figures)


if __name__ == "__main__":
    main()
