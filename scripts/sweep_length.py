"""Length normalization chosen on the valid split: Wu et al.'s and fairseq's rules over a grid of alpha, with
and without the patient stopping rule, beam 5, against greedy. Never run this on test.

    python scripts/sweep_length.py --run runs/cpu-base [--beam 5] [--checkpoint PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path


from nmt.data.dataset import load_references
from nmt.data.prepare import find_prepared
from nmt.metrics import bleu_metric, reference_streams
from nmt.translator import Translator

GRID = [("wu", a) for a in (1.0, 2.0, 3.0)] + [("fairseq", a) for a in (1.0, 1.5, 2.0)]


def score(translator, sources, streams, beam):
    result = bleu_metric(translator.target_lang).corpus_score(
        [t.text for t in translator.translate(sources, beam_size=beam)], streams)
    return result.score, result.sys_len / result.ref_len


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--beam", type=int, default=5)
    args = parser.parse_args()
    translator = Translator.from_run(args.run, args.checkpoint, device="cpu")
    prepared = find_prepared(translator.config.data, args.data_dir, translator.trained_on)
    sources, references = load_references(prepared, "valid")
    streams = reference_streams(references)
    bleu, ratio = score(translator, sources, streams, 1)
    print(f"{translator.checkpoint}: valid split, {len(sources)} sentences, every reference\n")
    print("| search | normalization | alpha | patient stop | valid BLEU | length ratio |")
    print("|---|---|---|---|---|---|")
    print(f"| greedy | - | - | - | {bleu:.2f} | {ratio:.3f} |", flush=True)
    base = translator.decode
    for kind, alpha in GRID:
        for patient in (False, True):
            translator.decode = dataclasses.replace(base, length_penalty=alpha, length_normalization=kind,
                                                    patient_stop=patient)
            bleu, ratio = score(translator, sources, streams, args.beam)
            print(f"| beam {args.beam} | {kind} | {alpha} | {'yes' if patient else 'no'} | {bleu:.2f} | "
                  f"{ratio:.3f} |", flush=True)


if __name__ == "__main__":
    main()
