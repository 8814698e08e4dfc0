#!/usr/bin/env bash
# Subwords, characters or words (data.tokenizer_type): the demo recipe (configs/demo.yaml, 420 s of training on the
# built-in corpus) once per level, one after the other, each averaged as `make demo` averages and scored with beam 5
# on the whole valid split, then on test; one record with every figure.
#   OUT=/tmp/levels bash scripts/tokenizer_levels_experiment.sh [RECORD]
# word: byte_fallback off (an unseen word is <unk>); char: max_pieces 1000, so that no held-out sentence is dropped
# for its length in characters (the split's sentences stay the same for the three levels). A level written
# unigram+A trains on drawn segmentations, data.subword_alpha A (subword regularization): LEVELS="unigram unigram+0.1".
# Needs the corpus (`nmt download`, or NMT_CORPUS_URL). ~40 minutes on a 2-core CPU: run it alone (each training is
# timed).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/levels}
RECORD=${1:-}
NMT=${NMT:-$REPO/.venv/bin/nmt}
PYTHON=${PYTHON:-$REPO/.venv/bin/python}
LEVELS=${LEVELS:-unigram word char}
read -r -a EXTRA <<< "${EXTRA:-}"  # more --set for every level (a quick dry run: EXTRA="--set train.time_budget_s=20")
mkdir -p "$OUT"
cd "$REPO"  # the corpus and prepared data under the repository's data/

for level in $LEVELS; do
  settings=(--set data.tokenizer_type="${level%%+*}")
  [ "$level" != "${level%%+*}" ] && settings+=(--set data.subword_alpha="${level#*+}")
  [ "$level" = word ] && settings+=(--set data.byte_fallback=false)
  [ "$level" = char ] && settings+=(--set data.max_pieces=1000)
  run="$OUT/runs/$level"
  "$NMT" train --config "$REPO/configs/demo.yaml" --run-dir "$run" "${settings[@]}" "${EXTRA[@]}" \
    > "$OUT/$level.train.log" 2>&1
  "$NMT" average --run "$run" --last 3 --allow-fewer
  for split in valid test; do
    "$NMT" evaluate --run "$run" --split "$split" > "$OUT/$level.$split.log" 2>&1
  done
done

COMMAND="OUT=$OUT LEVELS='$LEVELS' EXTRA='${EXTRA[*]}' bash scripts/tokenizer_levels_experiment.sh $RECORD"
"$PYTHON" - "$REPO/scripts" "$OUT" "$RECORD" "$COMMAND" $LEVELS <<'EOF'
import json
import sys
from pathlib import Path

sys.path.insert(0, sys.argv[1])
import numpy as np  # noqa: E402
from results_record import write_record  # noqa: E402

out, record, command, levels = Path(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]


def pieces(prepared: Path, shards: list[dict], key: str) -> int:
    """Pieces of one side of some shards, from their offsets."""
    return sum(int(offsets[-1] - offsets[0]) for shard in shards for offsets in [np.load(prepared / shard[key])])


figures = {}
for level in levels:
    run = out / "runs" / level
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    train = [m for m in metrics if m.get("type") == "train"]
    dev = [m["dev_bleu"] for m in metrics if "dev_bleu" in m]
    prepared = Path(json.loads((run / "env.json").read_text())["prepared_data"])
    manifest = json.loads((prepared / "manifest.json").read_text())
    # Pieces of the training text: how much longer a sentence is in characters, or in drawn segmentations.
    training = [pieces(prepared, manifest["shards"]["train"], key) for key in ("src_offsets", "tgt_offsets")]
    scores = {}
    for split in ("valid", "test"):
        report = next((run / "eval").glob(f"{split}*.beam5.report.json"))
        data = json.loads(report.read_text())
        scores[split] = {"bleu": data["bleu"], "chrf": data["chrf"], "report": str(report.name)}
    figures[level] = {"steps": max(m.get("step", 0) for m in metrics), "vocabulary": manifest["vocabulary"],
                      "dropped": manifest["dropped"], "training_pieces": {"source": training[0], "target": training[1]},
                      **({"drawn_training_pieces": [pieces(prepared, shards, "src_offsets") + pieces(prepared, shards,
                                                                                                    "tgt_offsets")
                                                    for shards in manifest["drawn_train_shards"]]}
                         if "drawn_train_shards" in manifest else {}),
                      "median_tokens_per_s": sorted(m["tokens_per_s"] for m in train)[len(train) // 2],
                      "last_dev_bleu_greedy_300": dev[-1] if dev else None,
                      **{f"{split}_bleu": scores[split]["bleu"] for split in scores},
                      **{f"{split}_chrf": scores[split]["chrf"] for split in scores}}
print(json.dumps(figures, indent=2))
if record:
    write_record(Path(record), recipe="configs/demo.yaml", levels=figures)
    written = json.loads(Path(record).read_text())
    Path(record).write_text(json.dumps({**written, "command": command}, indent=2) + "\n")  # the script, not python -
EOF
