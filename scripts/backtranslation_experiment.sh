#!/usr/bin/env bash
# Back-translation on the built-in corpus: does French monolingual text, translated into English by a reverse model,
# help an en→fr model trained on a small parallel part, and is beam search or sampling the better way to make it?
#   - the English sources are cut by a keyed hash into a parallel part (25%: all their pairs), a monolingual part
#     (the French of another 25%, at most MONO sentences, English thrown away) and the rest (unused);
#   - the parallel part's own valid and test sentences (5% each, every reference) are held out as files that all the
#     en→fr runs use, so that no run scores synthetic pairs and all are scored on the same real sentences;
#   - a fr→en model trains REVERSE_S seconds on the parallel part, then translates the monolingual French three
#     times: beam 5, unrestricted sampling and top-k 10 sampling (Edunov et al. 2018);
#   - four en→fr runs train EN_FR_S seconds each with the demo recipe: the parallel part alone, and with each set of
#     back-translations; then `nmt evaluate --compare` (paired bootstrap) on the test files.
#   OUT=/tmp/bt bash scripts/backtranslation_experiment.sh
# Needs the corpus at data/fra-eng/fra.txt (`nmt download`). About 25 minutes on a 2-core CPU: run it alone.
set -euo pipefail
OUT=${OUT:-/tmp/bt}
REVERSE_S=${REVERSE_S:-240}
EN_FR_S=${EN_FR_S:-240}
MONO=${MONO:-25000}
REPO=$(cd "$(dirname "$0")/.." && pwd)
NMT=${NMT:-$REPO/.venv/bin/nmt}
PYTHON=${PYTHON:-$REPO/.venv/bin/python}
CONFIG=$REPO/configs/demo.yaml
mkdir -p "$OUT" && cd "$OUT"

"$PYTHON" - "$REPO/data/fra-eng/fra.txt" "$MONO" <<'EOF'
import hashlib
import sys
from collections import defaultdict

corpus, mono_limit = sys.argv[1], int(sys.argv[2])
by_source = defaultdict(list)
with open(corpus, encoding="utf-8") as pairs:
    for line in pairs:
        english, french = line.rstrip("\n").split("\t")[:2]
        by_source[english.strip()].append(french.strip())


def bucket(english: str) -> int:
    return int(hashlib.blake2b(english.lower().encode(), digest_size=8, key=b"bt-demo").hexdigest(), 16) % 100


parts = defaultdict(list)
for english, translations in by_source.items():
    b = bucket(english)
    part = ("valid" if b < 5 else "test" if b < 10 else "train") if b < 25 else "mono" if b < 50 else "unused"
    parts[part].append((english, translations))


def write_pairs(name: str, rows) -> None:
    with open(f"{name}.en", "w", encoding="utf-8") as en, open(f"{name}.fr", "w", encoding="utf-8") as fr:
        for english, translations in rows:
            for french in translations:  # a source repeated on several lines gathers several references
                en.write(english + "\n")
                fr.write(french + "\n")


write_pairs("valid", parts["valid"])
write_pairs("test", parts["test"])
with open("parallel.tsv", "w", encoding="utf-8") as out, open("parallel-fr-en.tsv", "w", encoding="utf-8") as rev:
    for english, translations in parts["train"]:
        for french in translations:
            out.write(f"{english}\t{french}\n")
            rev.write(f"{french}\t{english}\n")
# French that is also a valid or test reference stays out: the back-translated runs would see it as a target.
held_out = {f for part in ("valid", "test") for _, translations in parts[part] for f in translations}
french = sorted({f for _, translations in parts["mono"] for f in translations} - held_out)
french = [f for f in french if bucket(f) % 2 == 0][:mono_limit]  # a fixed subset, one translation per line
with open("mono.fr", "w", encoding="utf-8") as out:
    out.writelines(f + "\n" for f in french)
# The test split for `nmt evaluate --src/--ref`: one line per source, one file per reference.
rows = parts["test"]
with open("test.src", "w", encoding="utf-8") as out:
    out.writelines(english + "\n" for english, _ in rows)
for k in range(max(len(t) for _, t in rows)):
    with open(f"test.ref{k:02d}", "w", encoding="utf-8") as out:
        out.writelines((t[k] if k < len(t) else "") + "\n" for _, t in rows)
print({name: len(rows) for name, rows in parts.items()}, "mono sentences:", len(french))
EOF

# The reverse model: French (kept as written) → English (lowercased with punctuation joined, as the en→fr runs
# normalize their English sources anyway).
"$NMT" train -c "$CONFIG" --run-dir runs/fr-en --data-dir data --set data.corpus=parallel-fr-en.tsv \
  --set data.source_lang=fr --set data.target_lang=en --set data.lowercase_source=false \
  --set data.join_punctuation_source=false --set train.time_budget_s="$REVERSE_S"
time "$NMT" translate --run runs/fr-en --beam 5 < mono.fr > bt-beam.en
time "$NMT" translate --run runs/fr-en --sample-topk 0 --seed 1 < mono.fr > bt-sampled.en
time "$NMT" translate --run runs/fr-en --sample-topk 10 --seed 1 < mono.fr > bt-top10.en
for kind in beam sampled top10; do
  paste "bt-$kind.en" mono.fr | cat parallel.tsv - > "parallel+bt-$kind.tsv"
done

EN_FR=(--data-dir data --set data.source_lang=en --set data.target_lang=fr --set data.lowercase_source=true
       --set data.join_punctuation_source=true --set data.valid_source_file=valid.en
       --set data.valid_target_file=valid.fr --set data.test_source_file=test.en --set data.test_target_file=test.fr
       --set train.time_budget_s="$EN_FR_S")
for corpus in parallel parallel+bt-beam parallel+bt-sampled parallel+bt-top10; do
  "$NMT" train -c "$CONFIG" --run-dir "runs/$corpus" --set data.corpus="$corpus.tsv" "${EN_FR[@]}"
done
REFS=()
for ref in test.ref*; do REFS+=(--ref "$ref"); done
"$NMT" evaluate --compare runs/parallel --compare runs/parallel+bt-beam --compare runs/parallel+bt-sampled \
  --compare runs/parallel+bt-top10 --src test.src "${REFS[@]}"
