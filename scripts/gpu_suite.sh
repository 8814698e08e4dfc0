#!/usr/bin/env bash
# The GPU suite: on one lent H100/H200 (about 40 minutes of device time, in commands of at most 10 minutes; more
# than a developer's 15-minute lease since 2026-11, which takes scripts/gpu_session.sh lease instead):
#   1. the CUDA-marked tests (bf16 autocast, compile, fused AdamW, pinned copies, CUDA RNG, NCCL flags)
#   2. training throughput and MFU for every architecture (scripts/bench_train.py, the real train step)
#   3. configs/{transformer,bahdanau,luong,seq2seq}.yaml trained to their best dev BLEU, each within
#      TRAIN_BUDGET_S seconds of training (train.time_budget_s; early stopping may end it sooner)
#   4. each best checkpoint on the test split: beam 5, every reference, BLEU by source length
#   5. one results table: $SUITE/results.md
#
# Run it again and again: every phase leaves a marker and training resumes exactly, so each command stops by
# itself after SLICE_S seconds and the next one continues. It prints "suite complete" at the end.
#
#   NMT_CORPUS_URL=/path/to/fra-eng.zip scripts/gpu_suite.sh
#   CONCURRENT=1 ... scripts/gpu_suite.sh   # the four trainings side by side on the one GPU (each TRAIN_BUDGET_S of wall time)
set -euo pipefail
cd "$(dirname "$0")/.."

SUITE=${SUITE:-gpu-suite}
SLICE_S=${SLICE_S:-540}               # one command's share: under the 10-minute limit, with room to save
TRAIN_BUDGET_S=${TRAIN_BUDGET_S:-420} # training seconds per architecture (4 × 7 min)
ARCHS=${ARCHS:-"transformer bahdanau luong seq2seq"}
EXTRA_SET=${EXTRA_SET:-}              # more --set overrides for every training (dry runs shrink the models)
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}                # DEVICE=cpu dry-runs the whole flow (tiny budgets) where no GPU is lent
# This tree's nmt for scripts/*.py too (a GPU image has none installed; see gpu_session.sh)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export NMT_DATA_DIR=${NMT_DATA_DIR:-data} PYTHONUNBUFFERED=1
START=$(date +%s)
mkdir -p "$SUITE"

left() { echo $(( SLICE_S - ($(date +%s) - START) )); }
done_marker() { test -f "$SUITE/done.$1"; }
mark() { touch "$SUITE/done.$1"; echo "== $1 done ($(( $(date +%s) - START )) s into this command)"; }
need() {  # stop this command when fewer than $1 seconds are left in the slice; the next run continues
  if [ "$(left)" -lt "$1" ]; then echo "== slice used up; run scripts/gpu_suite.sh again to continue"; exit 0; fi
}
nmt() { "$PYTHON" -m nmt "$@"; }

if ! done_marker setup; then
  "$PYTHON" -c "import sys, torch; cpu = sys.argv[1] == 'cpu'; assert cpu or torch.cuda.is_available(), 'no CUDA';
print('CPU (dry run)' if cpu else torch.cuda.get_device_name())" "$DEVICE" | tee "$SUITE/device.txt"
  nmt download --url "${NMT_CORPUS_URL:-http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip}"
  nmt prepare --config configs/transformer.yaml
  mark setup
fi

if ! done_marker tests; then
  need 120
  # A failing CUDA test is reported, not fatal: the trainings still tell what works on this device.
  "$PYTHON" -m pytest -q -rs -m cuda tests/test_cuda.py 2>&1 | tee "$SUITE/cuda-tests.txt" \
    || echo "== CUDA tests failed: see $SUITE/cuda-tests.txt"
  mark tests
fi

if ! done_marker bench; then
  need 120
  { "$PYTHON" scripts/bench_train.py --data-dir "$NMT_DATA_DIR" --device "$DEVICE" --steps "${BENCH_STEPS:-40}" --warmup "${BENCH_WARMUP:-5}" --max-tokens 8192 \
      --embed-dim 512 --hidden-size 512 --num-layers 2
    for arch in $ARCHS; do
      "$PYTHON" scripts/bench_train.py --data-dir "$NMT_DATA_DIR" --device "$DEVICE" --steps "${BENCH_STEPS:-40}" --warmup "${BENCH_WARMUP:-5}" \
        --config "configs/$arch.yaml" --archs "$arch" | tail -n 1
    done; } | tee "$SUITE/bench.md"
  mark bench
fi

train_concurrently() {
  # All architectures share the one GPU at once (CONCURRENT=1): each training runs in its own process session, so it
  # outlives this command; a later command finds it by its pid file and waits for it again.
  for arch in $ARCHS; do
    done_marker "train-$arch" && continue
    if [ -f "$SUITE/pid.$arch" ] && kill -0 "$(cat "$SUITE/pid.$arch")" 2>/dev/null; then continue; fi
    test -f "$SUITE/rc.$arch" && continue
    setsid nohup bash -c '"$@" > "$0.log" 2>&1; echo $? > "$0.rc"' "$SUITE/train-$arch" \
      "$PYTHON" -m nmt train --config "configs/$arch.yaml" --run-dir "runs/$arch" \
      --set "train.time_budget_s=$TRAIN_BUDGET_S" --set "train.device=$DEVICE" $EXTRA_SET < /dev/null > /dev/null 2>&1 &
    echo $! > "$SUITE/pid.$arch"
    echo "== started $arch (pid $!)"
  done
  while :; do
    running=0
    for arch in $ARCHS; do
      done_marker "train-$arch" && continue
      if [ -f "$SUITE/train-$arch.rc" ]; then
        if [ "$(cat "$SUITE/train-$arch.rc")" = 0 ]; then mark "train-$arch"
        else tr '\r' '\n' < "$SUITE/train-$arch.log" | tail -n 20; echo "== $arch failed"; exit 1; fi
      else running=$((running + 1)); fi
    done
    [ "$running" = 0 ] && break
    if [ "$(left)" -lt 30 ]; then
      for arch in $ARCHS; do
        done_marker "train-$arch" || echo "   $arch: $(tr '\r' '\n' < "$SUITE/train-$arch.log" | grep -E "step|dev" | tail -n 1)"
      done
      echo "== slice used up with $running training(s) still running; run again to wait for them"; exit 0
    fi
    sleep 10
  done
}
[ "${CONCURRENT:-0}" = 1 ] && train_concurrently

for arch in $ARCHS; do
  done_marker "train-$arch" && continue
  need 90
  # SIGTERM near the slice's end: the trainer stops at the next update boundary and saves; re-running resumes.
  status=0
  timeout -s TERM "$(( $(left) - 45 ))" "$PYTHON" -m nmt train --config "configs/$arch.yaml" \
    --run-dir "runs/$arch" --set "train.time_budget_s=$TRAIN_BUDGET_S" --set "train.device=$DEVICE" $EXTRA_SET 2>&1 | tee -a "$SUITE/train-$arch.log" \
    | grep -v "it/s" || status=$?
  if grep -qE "time budget of|already finished|done at step" "$SUITE/train-$arch.log" \
     && ! tail -n 3 "$SUITE/train-$arch.log" | grep -q "interrupted"; then
    mark "train-$arch"
  else
    echo "== $arch: slice over (status $status); run again to resume"; exit 0
  fi
done

for arch in $ARCHS; do
  done_marker "eval-$arch" && continue
  need 60
  nmt evaluate --run "runs/$arch" --split test --beam 5 --device "$DEVICE" | tee "$SUITE/eval-$arch.txt"
  nmt plot --run "runs/$arch" -o "$SUITE/curves-$arch.png"
  mark "eval-$arch"
done

"$PYTHON" - "$SUITE" $ARCHS <<'PY'
import json, sys
from pathlib import Path
suite, archs = Path(sys.argv[1]), sys.argv[2:]
device = (suite / "device.txt").read_text().strip()
rows = ["| model | params | best dev BLEU (step) | training time | test BLEU | chrF | BP | 1-5 | 6-10 | 11-15 | 16+ |",
        "|---|---|---|---|---|---|---|---|---|---|---|"]
for arch in archs:
    run = Path("runs") / arch
    report = json.loads((run / "eval" / "test.beam5.report.json").read_text())
    valid = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines() if '"valid"' in l]
    best = max(valid, key=lambda r: r["dev_bleu"])
    buckets = {b["bucket"]: b["bleu"] for b in report["buckets"]}
    bp = report["bleu_detail"].split("BP = ")[1].split()[0]
    from nmt.run_dir import CheckpointKind, Run
    weights = Run(run).load_weights(Run(run).checkpoint_path(CheckpointKind.BEST)).model
    # Tied matrices share a data pointer: count them once. (Not the storage: cuDNN packs every RNN weight into one.)
    params = sum({t.data_ptr(): t.numel() for t in weights.values()}.values())
    rows.append(f"| {arch} | {params / 1e6:.1f}M | {best['dev_bleu']:.2f} ({best['step']}) | {valid[-1]['time_s']:.0f} s "
                f"| {report['bleu']:.2f} | {report['chrf']:.2f} | {bp} | " + " | ".join(
                    f"{buckets[b]:.2f}" if buckets[b] is not None else "-" for b in ("1-5", "6-10", "11-15", "16+")) + " |")
text = f"Device: {device}. Test split, beam 5, every reference (sacrebleu).\n\n" + "\n".join(rows) + "\n\n" \
       + (suite / "bench.md").read_text()
(suite / "results.md").write_text(text)
print(text)
PY
echo "suite complete: $SUITE/results.md"
