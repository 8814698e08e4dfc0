"""Decoding precision on this CPU, chosen on the valid split: BLEU and sentences/s of a run's model translated in fp32
and under bf16 autocast, alternating (so drift in the machine's speed hits both alike).

    python scripts/bench_precision.py --run runs/demo [--beam 5] [--rounds 2] [--out results/x.json]

bf16 only means something on a CPU with native bf16 (AVX512-BF16 or AMX: `nmt.device.cpu_has_bf16`); elsewhere it is
emulated and slow. Never run this on test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from nmt.data.dataset import load_references
from nmt.data.prepare import find_prepared
from nmt.metrics import corpus_bleu
from nmt.translator import Translator
from results_record import write_record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    engines = {p: Translator.from_run(args.run, device="cpu", decode_overrides={"precision": p, "beam_size": args.beam})
               for p in ("fp32", "bf16")}
    sources, references = load_references(find_prepared(engines["fp32"].config.data, args.data_dir,
                                                      engines["fp32"].trained_on), "valid")
    speeds, bleus = {p: [] for p in engines}, {}
    for _ in range(args.rounds):
        for precision, engine in engines.items():
            started = time.perf_counter()
            hypotheses = [t.text for t in engine.translate(sources)]
            speeds[precision].append(len(sources) / (time.perf_counter() - started))
            bleus[precision] = corpus_bleu(hypotheses, references, engine.target_lang)
    figures = {p: {"valid_bleu": round(bleus[p], 2), "sentences_per_s": round(statistics.median(speeds[p]), 1),
                   "sentences_per_s_rounds": [round(s, 1) for s in speeds[p]]} for p in engines}
    print(json.dumps(figures, indent=2))
    if args.out:
        write_record(args.out, valid_sentences=len(sources), beam=args.beam, figures=figures)


if __name__ == "__main__":
    main()
