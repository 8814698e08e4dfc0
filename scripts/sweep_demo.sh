#!/usr/bin/env bash
# The demo recipe sweep (issue 9): the demo model as it was before the sweep (configs/demo.yaml with PyTorch's
# default init and no time budget) with one change per trial, each trained for the same number of updates (the demo's
# budget on this machine; a trial whose steps cost more gets proportionally fewer) and scored by greedy BLEU on the
# whole **valid** split (never test). Two trials run side by side with one thread each.
#
#   scripts/sweep_demo.sh            # → sweep-demo/results.md (setting → dev BLEU, steps, training seconds)
#
# BASE replaces the overrides every trial starts from (default: the pre-sweep demo, as issue 9 ran it). A trial that
# sets no train.max_steps is ended by its train.time_budget_s alone (equal wall clock per trial, validated once at
# its end): e.g. the recipe sweep of the current demo, two trials side by side with one thread each,
#   OUT=sweep-demo-budget BASE="train.time_budget_s=900 train.max_steps=100000" TRIALS="baseline|
#   dropout0|model.dropout=0" scripts/sweep_demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-sweep-demo}
NMT=${NMT:-.venv/bin/nmt}
STEPS=${STEPS:-450}
BASE=${BASE:-"model.init=default train.time_budget_s=0"}
mkdir -p "$OUT"
# name | overrides (space separated --set values)
TRIALS=${TRIALS:-"
baseline|train.max_steps=$STEPS
linear|train.max_steps=$STEPS train.schedule=linear train.warmup_steps=100
xavier|train.max_steps=$STEPS model.init=xavier
lr3e-3-warmup100|train.max_steps=$STEPS train.lr=3e-3 train.warmup_steps=100
"}

trial() {  # name, overrides
  local name=$1; shift
  local sets=(--set train.threads=1 --set train.eval_max_sentences=0 --set train.keep_last=0)
  local base; read -r -a base <<< "$BASE"
  for kv in "${base[@]}" "$@"; do sets+=(--set "$kv"); done
  # Validate once, at the end: at the trial's own max_steps, or (none given) when the time budget ends training.
  local steps; steps=$(printf '%s\n' "$@" | sed -n 's/^train.max_steps=//p')
  steps=${steps:-1000000}
  sets+=(--set "train.eval_every=$steps" --set "train.save_every=$steps")
  "$NMT" train --config configs/demo.yaml --run-dir "$OUT/runs/$name" "${sets[@]}" > "$OUT/$name.log" 2>&1
}

printf "%s\n" "$TRIALS" | sed "/^$/d" > "$OUT/trials.txt"
mapfile -t lines < <(printf '%s\n' "$TRIALS" | sed '/^$/d')
for ((i = 0; i < ${#lines[@]}; i += 2)); do
  pids=()
  for line in "${lines[@]:i:2}"; do
    name=${line%%|*}; sets=(); read -r -a sets <<< "${line#*|}"
    if [ -f "$OUT/runs/$name/checkpoints/best.pt" ]; then continue; fi
    echo "== $name: ${sets[*]}"
    trial "$name" "${sets[@]}" & pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
done

python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
settings = dict(line.split("|", 1) for line in (out / "trials.txt").read_text().splitlines())
rows = ["| trial | settings (on configs/demo.yaml) | steps | training s (1 thread, paired) | dev BLEU (greedy, whole valid) |",
        "|---|---|---|---|---|"]
for name, sets in settings.items():
    metrics = out / "runs" / name / "metrics.jsonl"
    valid = [r for r in map(json.loads, filter(str.strip, metrics.read_text().splitlines())) if r["type"] == "valid"][-1]
    rows.append(f"| {name} | `{sets}` | {valid['step']} | {valid['time_s']:.0f} | {valid['dev_bleu']:.2f} |")
(out / "results.md").write_text("\n".join(rows) + "\n")
print("\n".join(rows))
PY
