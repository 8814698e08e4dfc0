"""Decoding speed and BLEU on a test split: nmt's own decoder vs its CTranslate2 export (float32 and int8).

    python scripts/bench_decode.py --run runs/demo [--split test] [--beams 1 5] [--threads 2]

One process, one machine, the same sentences for every engine; sentences/s includes tokenization and
detokenization for both, and the run's decode settings for both (CTranslate2 has no patient stop: see
nmt/ct2_engine.py).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from nmt.data.dataset import load_references
from nmt.data.prepare import find_prepared
from nmt.ct2_engine import CTranslate2Engine
from nmt.export import export_ctranslate2
from nmt.metrics import corpus_bleu
from nmt.translator import Translator


def timed(translate, sources):
    started = time.perf_counter()
    hypotheses = [r.text for r in translate(sources)]
    return hypotheses, len(sources) / (time.perf_counter() - started)


def profile(nmt: Translator, sources: list[str], beam: int) -> None:
    """Where nmt's decoding time goes: torch operators by self CPU time, and Python's share of the wall clock."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    nmt.translate(sources[:50], beam_size=beam)  # warm-up
    started = time.perf_counter()
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        nmt.translate(sources, beam_size=beam)
    wall = time.perf_counter() - started
    ops = prof.key_averages()
    in_ops = sum(e.self_cpu_time_total for e in ops) / 1e6
    print(f"{len(sources)} sentences, beam {beam}: {wall:.2f} s under the profiler; torch operators account for "
          f"{in_ops:.2f} s of self CPU time (the rest: Python, tokenization, the profiler itself)")
    print(ops.table(sort_by="self_cpu_time_total", row_limit=15))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--split", default="test")
    parser.add_argument("--beams", type=int, nargs="*", default=[1, 5])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--profile", type=int, metavar="BEAM", help="instead: profile nmt's decoder at this beam")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    nmt = Translator.from_run(args.run, device="cpu")
    sources, references = load_references(find_prepared(nmt.config.data, args.data_dir, nmt.trained_on), args.split)
    if args.profile:
        profile(nmt, sources[:500], args.profile)
        return
    print(f"| engine | beam | sentences/s | BLEU ({len(sources)} {args.split} sentences, {args.threads} threads) |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        engines = {"nmt (PyTorch, fp32)": None}
        for quantization in ("float32", "int8"):
            export_ctranslate2(nmt, Path(tmp) / quantization, quantization)
            engines[f"CTranslate2 {quantization}"] = CTranslate2Engine(
                Path(tmp) / quantization, threads=args.threads, decode_overrides={"batch_size": args.batch_size})
        for beam in args.beams:
            for name, engine in engines.items():
                if engine is None:
                    run = lambda s: nmt.translate(s, beam_size=beam)  # noqa: E731
                else:
                    run = lambda s, e=engine: e.translate(s, beam_size=beam)  # noqa: E731
                run(sources[:50])  # warm-up
                hypotheses, speed = timed(run, sources)
                bleu = corpus_bleu(hypotheses, references, nmt.target_lang)
                print(f"| {name} | {beam} | {speed:,.1f} | {bleu:.2f} |", flush=True)


if __name__ == "__main__":
    main()
