"""Time-to-BLEU: wall clock from `nmt train`'s process start (imports, data, compile and validation included) until
dev BLEU first reaches a target, for several seeds; optionally the test BLEU reached within a wall-clock limit.

    python scripts/time_to_bleu.py --config configs/transformer.yaml --dev-bleu 50 --seeds 1 2 3 \\
        [--wall-limit-s 300 --test] [--set train.eval_every=250 ...] [--out results/time-to-bleu-....json]

Each seed trains in its own run directory under --runs (removed first: every process starts cold), and with a compile
cache of its own (a fresh TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR, removed after): a compiled run pays its whole
compile time, as a first run on a new machine does, unless --warm-compile-cache lets the seeds share the machine's
cache (a second run's state; the record says which). The script polls
the run's metrics.jsonl; a `valid` record at or above --dev-bleu gives that seed's time (accurate to the poll
interval). Training is stopped by SIGTERM (it saves at an update boundary) once the target is met, or at
--wall-limit-s; with --test the best checkpoint is then evaluated on the test split (beam as the config says,
every reference) and the test BLEU, and the wall clock it came within, are recorded too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nmt.run_logs import RECORD_TYPES, MetricsLog

sys.path.insert(0, str(Path(__file__).parent))
from results_record import write_record  # noqa: E402


def metric_records(metrics: Path) -> dict[str, list[dict]]:
    """The run's metrics.jsonl records by type (`valid`: validations, `train`: log windows, `checkpoint`); none yet
    while training starts up (a line being written is skipped)."""
    records: dict[str, list[dict]] = {kind: [] for kind in RECORD_TYPES}
    for record in MetricsLog(metrics).records() if metrics.is_file() else []:
        records[record["type"]].append(record)
    return records


def window_medians(windows: list[dict]) -> dict:
    """Throughput as the training log read it: the median over its windows, the first left out (it holds the
    start-up and any compilation), so that the figure is the warm one the issue's goals ask for."""
    warm = windows[1:]
    figures = {"train_windows": len(warm)}
    for key in ("tokens_per_s", "padded_tokens_per_s", "mfu"):
        values = [w[key] for w in warm if key in w]
        figures[f"median_{key}"] = round(statistics.median(values), 5 if key == "mfu" else 1) if values else None
    # The step split (device phases; on a GPU the host's too, and its blocked seconds): where a window's time went.
    split = sorted({key for w in warm for key in w
                    if key.endswith("_s") and not key.endswith("per_s") and key != "time_s"})
    figures["median_step_split_s"] = {key: round(statistics.median(w.get(key, 0.0) for w in warm), 3)
                                      for key in split}
    return figures


def dev_bleu_curve(validations: list[dict]) -> list[list[float]]:
    """[update, training seconds, dev BLEU] of each validation: two settings compared at the same update (a bf16
    residual stream passing 50 one validation later than the fp32 stream: how far below 50 was it there?)."""
    return [[r["step"], r.get("time_s"), r["dev_bleu"]] for r in validations]


def one_seed(args, seed: int) -> dict:
    run_dir = args.runs / f"seed{seed}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.parent.mkdir(parents=True, exist_ok=True)  # its stderr log lies beside it
    command = [sys.executable, "-m", "nmt", "train", "--config", str(args.config), "--run-dir", str(run_dir),
               "--data-dir", str(args.data_dir), "--set", f"train.seed={seed}"]
    for override in args.set:
        command += ["--set", override]
    env = dict(os.environ)
    cache = None if args.warm_compile_cache else Path(tempfile.mkdtemp(prefix="compile-cache-"))
    if cache is not None:
        env.update(TORCHINDUCTOR_CACHE_DIR=str(cache), TRITON_CACHE_DIR=str(cache / "triton"))
    try:
        return _train_and_time(args, seed, run_dir, command, env)
    finally:
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)


def train_until(command: list[str], env: dict, metrics: Path, stderr_log: Path, dev_bleu: float,
                wall_limit_s: float, stop_at_target: bool, poll_s: float) -> tuple[dict | None, float | None, int]:
    """Run `command` (an `nmt train`) and poll its metrics.jsonl: (the first validation at or above `dev_bleu`, the
    wall seconds from process start it was seen at, the exit status). SIGTERM at the target (`stop_at_target`) or
    at `wall_limit_s`. The child's stderr goes to `stderr_log`, never to a pipe: nobody reads a pipe while training
    runs, and once ~64 KiB of progress bar filled it the child blocked on its next write until the SIGTERM (the
    2026-11-26 H100 lease: a run stalled ~70 s at step 2,722, then was timed as never reaching its target)."""
    started = time.monotonic()
    with stderr_log.open("w") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, text=True, env=env)
        reached = reached_s = None
        while process.poll() is None:
            time.sleep(poll_s)
            wall = time.monotonic() - started
            if reached is None:
                reached = next((r for r in metric_records(metrics)["valid"] if r["dev_bleu"] >= dev_bleu), None)
                reached_s = wall if reached else None
            if (reached and stop_at_target) or wall >= wall_limit_s:
                process.send_signal(signal.SIGTERM)  # saves at the next update boundary, then exits
                break
        process.wait()
    return reached, reached_s, process.returncode


def _train_and_time(args, seed: int, run_dir: Path, command: list[str], env: dict) -> dict:
    started = time.monotonic()
    stderr_log = run_dir.with_name(f"{run_dir.name}.stderr.log")  # beside the run: the run directory starts empty
    reached, reached_s, returncode = train_until(command, env, run_dir / "metrics.jsonl", stderr_log, args.dev_bleu,
                                                 args.wall_limit_s, not args.test, args.poll_s)
    if returncode not in (0, -signal.SIGTERM, 130, 143):
        raise SystemExit(f"seed {seed}: nmt train failed ({returncode}):\n{stderr_log.read_text()[-2000:]}")
    trained_s = time.monotonic() - started
    logged = metric_records(run_dir / "metrics.jsonl")
    records = logged["valid"]
    result = {"seed": seed, "dev_bleu_target": args.dev_bleu,
              "seconds_to_target": None if reached_s is None else round(reached_s, 1),
              "step_at_target": reached["step"] if reached else None,
              # the training clock of that validation's weights (from the first update's start): the rest of
              # seconds_to_target is start-up (imports, data, model) and the validation itself
              "training_s_at_target": reached["time_s"] if reached else None,
              # ...and before it, the process's start-up: imports, data, model, device (nmt train's `start` record)
              "setup_s": logged["start"][0]["setup_s"] if logged["start"] else None,
              "setup_parts_s": logged["start"][0].get("setup_parts_s") if logged["start"] else None,
              "best_dev_bleu": max((r["dev_bleu"] for r in records), default=None),
              "dev_bleu_curve": dev_bleu_curve(records),
              "validations": len(records), "wall_s": round(trained_s, 1),
              # what the wall clock spent outside training: the knobs of a faster time-to-target (eval_every,
              # decode.batch_size, save_every)
              "validation_s": round(sum(r.get("seconds", 0.0) for r in records), 1),
              # ...and of those seconds, what training waited for (all of an inline validation's; of one run beside
              # training, train.eval_in_background, only the wait at the point that needed its outcome)
              "validation_waited_s": round(sum(r.get("waited_s", r.get("seconds", 0.0)) for r in records), 1),
              "background_validations": sum(bool(r.get("background")) for r in records),
              # ...of which the dev loss, the greedy decoding of the valid split, and sacrebleu's scoring
              **{f"validation_{part}_s": round(sum(r.get(f"{part}_s", 0.0) for r in records), 1)
                 for part in ("loss", "decode", "score")},
              "checkpoint_wait_s": round(sum(r.get("seconds", 0.0) for r in logged["checkpoint"]), 1),
              **window_medians(logged["train"])}
    if args.test:
        evaluating = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "nmt", "evaluate", "--run", str(run_dir), "--split", "test",
                              "--data-dir", str(args.data_dir)], capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"seed {seed}: nmt evaluate failed:\n{out.stderr[-2000:]}")
        report = max((run_dir / "eval").glob("test.*.report.json"), key=lambda p: p.stat().st_mtime)
        result["test_bleu"] = json.loads(report.read_text())["bleu"]
        result["test_evaluate_s"] = round(time.monotonic() - evaluating, 1)  # beam search over the test split
    print(json.dumps(result), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--dev-bleu", type=float, required=True, help="target dev BLEU (greedy, as validation runs)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--wall-limit-s", type=float, default=600.0, help="stop training here even without target")
    parser.add_argument("--test", action="store_true", help="train to the wall limit, then evaluate test BLEU")
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE for every seed's training")
    parser.add_argument("--runs", type=Path, default=Path("runs/time-to-bleu"))
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--poll-s", type=float, default=0.5)
    parser.add_argument("--warm-compile-cache", action="store_true",
                        help="let the seeds share the machine's inductor/triton cache (default: a fresh one each)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = [one_seed(args, seed) for seed in args.seeds]
    times = [r["seconds_to_target"] for r in results]
    # A seed that never reached the target makes the median undefined: say how many did.
    summary = {"seeds_reaching_target": sum(t is not None for t in times),
               "median_seconds_to_target": statistics.median(times) if None not in times else None}
    mfus = [r["median_mfu"] for r in results if r["median_mfu"] is not None]
    summary["median_mfu_over_seeds"] = statistics.median(mfus) if mfus else None
    if args.test:
        summary["median_test_bleu"] = statistics.median(r["test_bleu"] for r in results)
    print(json.dumps(summary))
    if args.out:
        write_record(args.out, config=str(args.config), overrides=args.set, wall_limit_s=args.wall_limit_s,
                     compile_cache="shared with the machine (--warm-compile-cache)" if args.warm_compile_cache
                     else "cold: a fresh TORCHINDUCTOR_CACHE_DIR/TRITON_CACHE_DIR per seed",
                     seeds=results, **summary)


if __name__ == "__main__":
    main()
