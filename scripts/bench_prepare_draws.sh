#!/usr/bin/env bash
# Seconds of `nmt prepare` on the built-in corpus with data.subword_alpha 0.1 (4 draws) at an earlier commit and at
# the working tree, and without draws, alternating, 3 times each; one line per run ("variant run seconds").
#   bash scripts/bench_prepare_draws.sh 6b5769b [DATA_DIR]
# DATA_DIR holds fra-eng/ (default: the repository's data/); each run prepares into a scratch copy of it. Run it
# alone on the machine (each run is timed).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BEFORE=$1
DATA=$(cd "${2:-$REPO/data}" && pwd)
PYTHON=${PYTHON:-$REPO/.venv/bin/python}
SCRATCH=$(mktemp -d)
trap 'git -C "$REPO" worktree remove --force "$SCRATCH/before" 2>/dev/null; rm -rf "$SCRATCH"' EXIT
git -C "$REPO" worktree add -q "$SCRATCH/before" "$BEFORE"
mkdir "$SCRATCH/data" && ln -s "$DATA/fra-eng" "$SCRATCH/data/fra-eng"
cd "$SCRATCH"  # python -m puts the working directory first on sys.path: PYTHONPATH then picks the code
for run in 1 2 3; do
  for variant in before after none; do
    rm -rf "$SCRATCH/data/prepared"
    code=$REPO alpha=0.1
    [ "$variant" = before ] && code=$SCRATCH/before
    [ "$variant" = none ] && alpha=0
    /usr/bin/time -o "$SCRATCH/seconds" -f "%e" env PYTHONPATH="$code" "$PYTHON" -m nmt prepare \
      --config "$REPO/configs/demo.yaml" --data-dir "$SCRATCH/data" --set data.subword_alpha=$alpha > /dev/null 2>&1
    echo "$variant $run $(cat "$SCRATCH/seconds")"
  done
done
