#!/usr/bin/env bash
# Fine-tuning (train.init_from) against training from scratch, on the built-in corpus cut in two by a rule:
#   SPLIT=questions: the parent trains on every pair whose English is not a question, the "domain" is the questions
#   SPLIT=random:    the parent trains on 90% of the English sources (a keyed hash), the "domain" is the other 10%
# The parent trains with the demo recipe (420 s); then, on the domain's own split, a run fine-tuned from the parent
# and a run from scratch get CHILD_S seconds each; the three are compared on the domain's test split (paired bootstrap).
# The two parts share no source sentence, so the parent never saw the domain's test sentences.
#   SPLIT=questions OUT=/tmp/ft-questions bash scripts/finetune_experiment.sh
# Needs the corpus at data/fra-eng/fra.txt (`nmt download`). Takes ~15 minutes on a 2-core CPU: run it alone.
set -euo pipefail
SPLIT=${SPLIT:-questions}
OUT=${OUT:-/tmp/ft-$SPLIT}
CHILD_S=${CHILD_S:-120}
REPO=$(cd "$(dirname "$0")/.." && pwd)
NMT=${NMT:-$REPO/.venv/bin/nmt}
PYTHON=${PYTHON:-$REPO/.venv/bin/python}
CONFIG=$REPO/configs/demo.yaml
mkdir -p "$OUT" && cd "$OUT"

"$PYTHON" - "$REPO/data/fra-eng/fra.txt" "$SPLIT" <<'EOF'
import hashlib
import sys

corpus, split = sys.argv[1], sys.argv[2]
with open(corpus, encoding="utf-8") as pairs, open("parent.tsv", "w", encoding="utf-8") as parent, \
        open("domain.tsv", "w", encoding="utf-8") as domain:
    for line in pairs:
        english = line.split("\t")[0].strip()
        if split == "questions":
            in_domain = english.endswith("?")
        else:
            key = hashlib.blake2b(english.lower().encode(), digest_size=8, key=b"ft-demo").hexdigest()
            in_domain = int(key, 16) % 10 == 0
        (domain if in_domain else parent).write(line)
EOF

# Both parts normalized as the built-in corpus is (English lowercased, punctuation joined), languages named.
COMMON=(--data-dir data --set data.source_lang=en --set data.target_lang=fr --set data.lowercase_source=true
        --set data.join_punctuation_source=true)
CHILD=(--set data.corpus=domain.tsv --set train.time_budget_s="$CHILD_S" --set train.eval_every=200)
"$NMT" train -c "$CONFIG" --run-dir runs/parent --set data.corpus=parent.tsv "${COMMON[@]}"
# Fine-tuning: a lower peak lr and a short warm-up (the weights are trained already); from scratch: the demo's own.
"$NMT" train -c "$CONFIG" --run-dir runs/finetuned "${COMMON[@]}" "${CHILD[@]}" --set train.init_from=runs/parent \
  --set train.lr=5e-4 --set train.warmup_steps=50
"$NMT" train -c "$CONFIG" --run-dir runs/scratch "${COMMON[@]}" "${CHILD[@]}"

# The domain's test split as files (a source and one file per reference, empty where a source has fewer), so that
# the parent, trained on other data, is scored on the same sentences.
"$PYTHON" - runs/finetuned/env.json <<'EOF'
import json
import sys
from pathlib import Path

prepared = Path(json.loads(Path(sys.argv[1]).read_text())["prepared_data"])
rows = [json.loads(line) for line in (prepared / "test.jsonl").read_text(encoding="utf-8").splitlines()]
Path("test.src").write_text("".join(row["source"] + "\n" for row in rows), encoding="utf-8")
for k in range(max(len(row["references"]) for row in rows)):
    Path(f"test.ref{k:02d}").write_text("".join((row["references"][k] if k < len(row["references"]) else "") + "\n"
                                                for row in rows), encoding="utf-8")
EOF
REFS=()
for ref in test.ref*; do REFS+=(--ref "$ref"); done
"$NMT" evaluate --compare runs/finetuned --compare runs/scratch --compare runs/parent --src test.src "${REFS[@]}"
