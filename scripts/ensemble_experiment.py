"""Does an ensemble beat its members? Each model alone, then all of them as one ensemble (`--ensemble`), on a split
of the first one's data: BLEU with sacrebleu's paired bootstrap against the first, and sentences/s at the first's
beam (one after the other on the same machine: compare the speeds as ratios). A model is a run directory (the
checkpoint it translates with) or a checkpoint file (checkpoints of one run: ensemble or average?); `--also` adds
single models to the table, such as the run's averaged.pt.

    python scripts/ensemble_experiment.py --run runs/demo --member runs/demo-seed3 [--member ...] \
        [--also runs/demo/checkpoints/averaged.pt] [--split valid] [--out results/ensemble-....json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nmt.data.dataset import load_references  # noqa: E402
from nmt.evaluate import compare  # noqa: E402
from nmt.translator import Translator  # noqa: E402
from results_record import write_record  # noqa: E402


def open_model(path: Path, ensemble: list[Path] = ()) -> Translator:
    if Path(path).is_file():
        return Translator.from_run(None, path, device="cpu", ensemble=ensemble)
    return Translator.from_run(path, device="cpu", ensemble=ensemble)


def timed_translations(translator: Translator, sources: list[str]) -> tuple[list[str], float]:
    translator.translate(sources[:50])  # warm-up: the first batches meet new shapes
    started = time.perf_counter()
    texts = [t.text for t in translator.translate(sources)]
    return texts, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="the first member (the baseline of the p-values)")
    parser.add_argument("--member", type=Path, action="append", required=True, help="another run (repeatable)")
    parser.add_argument("--also", type=Path, action="append", default=[], help="another single model to compare")
    parser.add_argument("--split", action="append", help="valid and/or test (default: both)")
    parser.add_argument("--out", type=Path, help="also write the figures as a results/ record")
    parser.add_argument("--note", default="", help="how the runs were trained (kept in the record)")
    args = parser.parse_args()
    systems = {str(path): open_model(path) for path in [args.run, *args.member, *args.also]}
    systems["ensemble"] = open_model(args.run, args.member)
    first = systems[str(args.run)]
    figures = {"runs": list(systems)[:-1], "checkpoints": [str(t.checkpoint) for t in systems.values()][:-1],
               "beam": first.decode.beam_size, "threads": torch.get_num_threads(),
               "precision": first.describe()["precision"], "note": args.note, "splits": {}}
    for split in args.split or ["valid", "test"]:
        sources, references = load_references(first.trained_on, split)
        outputs = {name: timed_translations(translator, sources) for name, translator in systems.items()}
        table = compare([(name, texts) for name, (texts, _) in outputs.items()], references,
                        target_lang=first.target_lang)
        figures["splits"][split] = {
            "sentences": len(sources), "bleu_signature": table.signature,
            "systems": [{**row, "sentences_per_s": round(len(sources) / outputs[row["system"]][1], 1)}
                        for row in table.rows]}
        print(json.dumps(figures["splits"][split], indent=1))
    if args.out:
        write_record(args.out, **figures)


if __name__ == "__main__":
    main()
