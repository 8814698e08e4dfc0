#!/usr/bin/env bash
# Training throughput, before vs after, on this machine in one run: scripts/bench_train.py from a checkout of the
# BEFORE commit and from this tree, alternating ROUNDS times (so drift in the machine's speed hits both alike).
#
#   scripts/ab_train.sh BEFORE_COMMIT [CONFIG] [ROUNDS]      e.g. scripts/ab_train.sh ddabc86 configs/demo.yaml 3
#   scripts/ab_train.sh .device/trees/ddabc86 ...            the BEFORE tree exported ahead (no git history needed)
#
# Prints one line per run (tokens/s of the real training step: forward, backward, clipping, AdamW) and the median
# ratio. Needs the corpus and this tree's prepared data under data/ (nmt prepare --config CONFIG).
# RECORD=results/NAME.json also writes the figures as a results/ record. SET="KEY=VALUE ..." passes config overrides
# to both (e.g. SET="model.arch=bahdanau model.hidden_size=256" for the demo-size Bahdanau).
set -euo pipefail
before=${1:?before commit}; config=${2:-configs/demo.yaml}; rounds=${3:-3}
steps=${STEPS:-40}; warmup=${WARMUP:-10}
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
[ -x "$python" ] || python=python3  # a lent GPU machine: its python3 holds torch
[[ $python == */* ]] && python=$(cd "$(dirname "$python")" && pwd)/$(basename "$python")  # runs inside other trees
tree=$(mktemp -d)
if [ -d "$before" ]; then  # a tree exported ahead (scripts/device_pack.sh): a lent GPU machine has no git history
  cp -r "$before/." "$tree/"
  trap 'rm -rf "$tree"' EXIT
  before=$(cat "$before/COMMIT" 2>/dev/null || basename "$before")
else
  trap 'git -C "$root" worktree remove --force "$tree" >/dev/null 2>&1 || true' EXIT
  git -C "$root" worktree add --force --detach "$tree" "$before" >/dev/null 2>&1
fi
# The BEFORE code gets the config without the settings added after it (it would refuse them as unknown keys; e.g.
# ddabc86 and train.onednn_cache): those stay a part of "after", and the record names them.
dropped=$(cd "$tree" && PYTHONPATH="$tree" "$python" - "$root/$config" "$tree/ab-config.yaml" <<'PY'
import dataclasses, sys, yaml
from nmt.config import Config
raw, defaults = yaml.safe_load(open(sys.argv[1])) or {}, Config()
dropped = []
for section, settings in raw.items():
    known = getattr(defaults, section, None)
    if not dataclasses.is_dataclass(known) or not isinstance(settings, dict):
        continue
    names = {f.name for f in dataclasses.fields(known)}
    dropped += [f"{section}.{key}" for key in settings if key not in names]
    raw[section] = {key: value for key, value in settings.items() if key in names}
yaml.safe_dump(raw, open(sys.argv[2], "w"), sort_keys=False)
print(" ".join(dropped))
PY
)
[ -z "$dropped" ] || echo "note: the BEFORE tree ($before) does not know $dropped: left out of its config" >&2
# Each tree reads the data in its own format: the BEFORE code prepares its copy beside it.
mkdir -p "$tree/data" && cp -r "$root/data/fra-eng" "$tree/data/"
(cd "$tree" && PYTHONPATH="$tree" "$python" -m nmt prepare --config ab-config.yaml --data-dir "$tree/data" >/dev/null)
read -r -a overrides <<< "${SET:-}"
sets=(); for kv in "${overrides[@]}"; do sets+=(--set "$kv"); done
run() {  # $1: tree, $2: its config → tokens/s
  # This tree's bench reports a median of windows; the BEFORE code's, one mean over its steps: measured alike here.
  local same=(); [ "$1" = "$root" ] && same=(--windows 1)
  (cd "$1" && PYTHONPATH="$1" "$python" scripts/bench_train.py --data-dir "$1/data" --config "$2" \
     "${sets[@]}" "${same[@]}" --archs transformer --steps "$steps" --warmup "$warmup" | tail -n 1 | awk -F'|' '{gsub(/[ ,]/, "", $4); print $4}')
}
summarize() {  # the median ratio over the rounds so far; with RECORD, the record (rewritten after every round, so that a
               # run cut off by a time limit still leaves the rounds it finished)
  (cd "$root" && PYTHONPATH="$root" "$python" - "${old[*]}" "${new[*]}" "$before" "$config" "$rounds" "$steps" "$warmup" \
     "${RECORD:-}" "${SET:-}" "$dropped" <<'PY'
import statistics, sys
from scripts.results_record import write_record
old, new = ([float(x) for x in a.split()] for a in sys.argv[1:3])
before, config, rounds, steps, warmup, record, overrides, dropped = sys.argv[3:]
ratio = statistics.median(new) / statistics.median(old)
print(f"median before {statistics.median(old):,.0f}, after {statistics.median(new):,.0f} tokens/s: {ratio:.2f}x"
      f" ({len(old)} of {rounds} rounds)")
if record:
    sys.argv = ["scripts/ab_train.sh", before, config, rounds, f"(STEPS={steps} WARMUP={warmup} SET='{overrides}')"]
    write_record(record, figures={"before_commit": before, "config": config, "overrides": overrides.split(),
                                  "settings_left_out_before": dropped.split(),
                                  "rounds_planned": int(rounds), "rounds_done": len(old),
                                  "before_tokens_per_s": old,
                                  "after_tokens_per_s": new, "median_ratio": round(ratio, 3)})
PY
  )
}
declare -a old new
for i in $(seq "$rounds"); do
  old+=("$(run "$tree" "$tree/ab-config.yaml")"); new+=("$(run "$root" "$root/$config")")
  echo "round $i: before ${old[-1]} tokens/s, after ${new[-1]} tokens/s"
  summarize
done
