"""Preparation at WMT scale: a synthetic parallel corpus of N pairs → `nmt prepare`, timed, with the peak resident
memory of its whole process tree (sampled from /proc every 0.2 s); then, optionally, a few training steps on it to
show that training's memory does not grow with the corpus.

    python scripts/bench_prepare.py --pairs 10000000 [--pairs 1000000] [--train-steps 20] [--out results/x.json]

The corpus: sentences of 4–16 words drawn from a 30,000-word Zipf vocabulary, the target a word-by-word mapping in
reverse order (learnable, not trivial), 1% exact duplicates. Written as .tsv once per size under --work.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from process_memory import TreeMemory
from results_record import write_record


def make_corpus(path: Path, pairs: int, seed: int = 0) -> None:
    if path.is_file():
        return
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(30_000)], dtype=object)
    mapped = np.array([f"m{i}" for i in range(30_000)], dtype=object)
    ranks = np.arange(1, 30_001)
    probabilities = (1 / ranks) / (1 / ranks).sum()
    partial = path.with_suffix(".part")
    with open(partial, "w", encoding="utf-8") as out:
        done = 0
        while done < pairs:
            n = min(200_000, pairs - done)
            lengths = rng.integers(4, 17, n)
            ids = rng.choice(30_000, size=(n, 16), p=probabilities)
            lines = []
            for row, length in zip(ids, lengths):
                row = row[:length]
                lines.append(" ".join(words[row]) + " .\t" + " ".join(mapped[row[::-1]]) + " .\n")
            duplicates = rng.integers(0, n, n // 100)
            out.writelines(lines)
            out.writelines(lines[i] for i in duplicates)
            done += n + len(duplicates)
    partial.rename(path)


def measured(command: list[str], env: dict) -> tuple[float, int, str, int]:
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    memory = TreeMemory(process.pid)
    output = process.communicate()[0]
    peak = memory.finish()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{output[-2000:]}")
    return time.perf_counter() - started, peak, output, memory.peak_anon


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, action="append", required=True)
    parser.add_argument("--work", type=Path, default=Path("bench-prepare"))
    parser.add_argument("--train-steps", type=int, default=0, help="then train a tiny model this many steps")
    parser.add_argument("--train-only", action="store_true", help="skip the timed preparation (data prepared before)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "NMT_DATA_DIR": str(args.work / "data")}
    records = []
    for pairs in args.pairs:
        corpus = args.work / f"synthetic-{pairs}.tsv"
        make_corpus(corpus, pairs)
        lines = sum(1 for _ in open(corpus, "rb"))
        data = ["--set", f"data.corpus={corpus}", "--set", "data.source_lang=en", "--set", "data.target_lang=fr",
                "--set", "data.max_pieces=64"]
        record = {"pairs_in_file": lines}
        if not args.train_only:
            seconds, peak, output, anon = measured([sys.executable, "-m", "nmt", "prepare", "--force", *data], env)
            record.update(prepare_s=round(seconds, 1), pairs_per_s=round(lines / seconds),
                          prepare_peak_rss_gib=round(peak / 2**30, 3), prepare_peak_anon_gib=round(anon / 2**30, 3),
                          summary=output.strip().splitlines()[-1])
        if args.train_steps:
            config = args.work / "tiny.yaml"
            config.write_text(
                "model: {arch: transformer, embed_dim: 64, num_layers: 1, num_heads: 2, ff_dim: 128}\n"
                f"train: {{max_steps: {args.train_steps}, max_tokens: 2000, eval_every: 100000, save_every: 100000, "
                "eval_max_sentences: 8, log_every: 5, device: cpu}\n")
            run_dir = args.work / f"run-{pairs}"
            subprocess.run(["rm", "-rf", str(run_dir)], check=True)
            seconds, peak, _, anon = measured([sys.executable, "-m", "nmt", "train", "--config", str(config),
                                               "--run-dir", str(run_dir), *data], env)
            record.update(train_steps=args.train_steps, train_s=round(seconds, 1),
                          train_peak_rss_gib=round(peak / 2**30, 3), train_peak_anon_gib=round(anon / 2**30, 3))
        records.append(record)
        print(json.dumps(record), flush=True)
    if args.out:
        write_record(args.out, results=records)


if __name__ == "__main__":
    main()
