"""Reading a corpus of one's own, by its format: the built-in corpus's 167,130 pairs written as a TSV, as JSON lines and
as TMX (OPUS's three ways), each read through `read_pairs` as prepare reads it; seconds (best of --repeats) and
pairs/s, in one process, so that the formats compare as ratios.

    python scripts/bench_pair_formats.py [--corpus ../shared/data/fra-eng.zip] [--out results/x.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

from nmt.config import DataConfig
from nmt.data.sources import corpus_spec, read_pairs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_record import write_record  # noqa: E402

WRITERS = {
    "tsv": (lambda pairs: "".join(f"{en}\t{fr}\n" for en, fr in pairs)),
    "jsonl": (lambda pairs: "".join(json.dumps({"translation": {"en": en, "fr": fr}}, ensure_ascii=False) + "\n"
                                    for en, fr in pairs)),
    "tmx": (lambda pairs: '<?xml version="1.0" encoding="utf-8"?>\n<tmx version="1.0">\n<header srclang="en"/>\n'
            "<body>\n" + "".join(f'<tu><tuv xml:lang="en"><seg>{escape(en)}</seg></tuv><tuv xml:lang="fr"><seg>'
                                 f"{escape(fr)}</seg></tuv></tu>\n" for en, fr in pairs) + "</body>\n</tmx>\n"),
}


def builtin_pairs(corpus: Path) -> list[tuple[str, str]]:
    with zipfile.ZipFile(corpus) as archive:
        text = archive.read("fra-eng/fra.txt").decode("utf-8")
    return [tuple(line.split("\t")[:2]) for line in text.splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=Path("../shared/data/fra-eng.zip"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, help="also write the figures as a results/ record")
    args = parser.parse_args()
    pairs = builtin_pairs(args.corpus)
    figures = {}
    with tempfile.TemporaryDirectory() as work:
        for name, write in WRITERS.items():
            path = Path(work) / f"fra-eng.{name}"
            path.write_text(write(pairs), encoding="utf-8")
            spec = corpus_spec(DataConfig(corpus=str(path), source_lang="en", target_lang="fr"), Path(work))
            times = []
            for _ in range(args.repeats):
                started = time.perf_counter()
                read = sum(1 for _ in read_pairs(spec))
                times.append(time.perf_counter() - started)
            assert read == len(pairs), (name, read, len(pairs))
            figures[name] = {"bytes": path.stat().st_size, "seconds": round(min(times), 3),
                             "pairs_per_s": round(read / min(times))}
    result = {"pairs": len(pairs), "repeats": args.repeats, "formats": figures,
              "tmx_vs_tsv_time": round(figures["tmx"]["seconds"] / figures["tsv"]["seconds"], 2)}
    print(json.dumps(result, indent=2))
    if args.out:
        write_record(args.out, **result)


if __name__ == "__main__":
    main()
