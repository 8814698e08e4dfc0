"""Sampling with the CTranslate2 engine (back-translation at scale): sentences/s of its sampler alone, and of the
engine with nmt's rescoring (the model's own log-probability of every draw, one `score_batch` per call), beside
nmt's own sampler on the same sentences.

    python scripts/bench_ct2_sampling.py --run runs/demo [--quantization int8] [--split valid] [--out results/....json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nmt.ct2_engine import CTranslate2Engine, translate_options  # noqa: E402
from nmt.data.dataset import load_references  # noqa: E402
from nmt.export import export_ctranslate2  # noqa: E402
from nmt.translator import Translator  # noqa: E402
from results_record import write_record  # noqa: E402


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--quantization", default="int8")
    parser.add_argument("--split", default="valid")
    parser.add_argument("--topk", type=int, default=10)
    parser.add_argument("--out", type=Path, help="also write the figures as a results/ record")
    args = parser.parse_args()
    sampling = {"beam_size": 1, "sampling_topk": args.topk, "length_normalization": "fairseq",
                "patient_stop": False}
    translator = Translator.from_run(args.run, device="cpu", decode_overrides=sampling)
    sources, _ = load_references(translator.trained_on, args.split)
    with tempfile.TemporaryDirectory() as tmp:
        export_ctranslate2(translator, Path(tmp) / "ct2", args.quantization)
        engine = CTranslate2Engine(Path(tmp) / "ct2", decode_overrides=sampling)
        engine.translate(sources[:100])  # warm-up
        pieces = [engine._pieces(s)[0] for s in sources]
        options = translate_options(engine.decode, max(map(len, pieces)) + 1)
        sampler_alone = timed(lambda: engine.engine.translate_batch(pieces, return_scores=True, **options))
        whole = timed(lambda: engine.translate(sources))
    translator.translate(sources[:100])
    nmt_engine = timed(lambda: translator.translate(sources))
    figures = {"run": str(args.run), "split": args.split, "sentences": len(sources), "sampling_topk": args.topk,
               "quantization": args.quantization,
               "ct2_sampler_alone_sentences_per_s": round(len(sources) / sampler_alone, 1),
               "ct2_engine_with_rescoring_sentences_per_s": round(len(sources) / whole, 1),
               "nmt_engine_sentences_per_s": round(len(sources) / nmt_engine, 1),
               "nmt_engine_precision": translator.describe()["precision"]}
    print(json.dumps(figures, indent=1))
    if args.out:
        write_record(args.out, **figures)


if __name__ == "__main__":
    main()
