#!/usr/bin/env bash
# What a lent GPU machine needs beside the working tree, in .device/ (ignored by git; name it in the device tool's
# `carry`): the corpus (the machine reaches no network, and ../shared does not travel), the commit the tree is at
# (the copy has no git history, and results/ records name their commit), and the BEFORE trees of the A/B benchmarks
# as plain files (scripts/ab_train.sh takes a directory where it would check out a commit).
#
#   scripts/device_pack.sh [BEFORE_COMMIT ...]       default: ddabc86 (the Transformer's A/B), 606d490 (the RNNs')
#
# Run it after committing: it records HEAD. scripts/gpu_session.sh is what runs there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pack=$root/.device
corpus=${NMT_CORPUS_URL:-$root/../shared/data/fra-eng.zip}
corpus=${corpus#file://}
test -f "$corpus" || { echo "error: no corpus at $corpus (set NMT_CORPUS_URL to a local fra-eng.zip)" >&2; exit 2; }
if [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]; then
  echo "warning: uncommitted changes travel with the tree but .device/COMMIT names HEAD" >&2
fi
rm -rf "$pack"
mkdir -p "$pack/trees"
cp "$corpus" "$pack/fra-eng.zip"
git -C "$root" rev-parse --short HEAD > "$pack/COMMIT"
# What a time-to-BLEU run's seconds depend on, as scripts/gpu_report.py pairs seeds by it (its training_code: the
# git objects of nmt/, configs/ and the measuring script; one definition): the lease skips seeds that an earlier
# lease of the same code trained. gpu_report imports only the standard library at its top.
"${PYTHON:-python3}" -c 'import sys; sys.path.insert(0, sys.argv[1]); from gpu_report import training_code
print(training_code("HEAD"))' "$root/scripts" > "$pack/TRAINING_CODE"
befores=("$@"); [ ${#befores[@]} -gt 0 ] || befores=(ddabc86 606d490)
for commit in "${befores[@]}"; do
  mkdir -p "$pack/trees/$commit"
  git -C "$root" archive "$commit" | tar -x -C "$pack/trees/$commit"
  git -C "$root" rev-parse --short "$commit" > "$pack/trees/$commit/COMMIT"
done
echo "packed $(du -sh "$pack" | cut -f1) in .device/ (commit $(cat "$pack/COMMIT")): carry [\".device\", \"gpu-session\"]"
