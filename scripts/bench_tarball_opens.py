"""Reading an aligned corpus from one tarball (Europarl's fr-en.tgz form: a file per language): how many times the
archive is listed, and the seconds to its fingerprint and its first pair, with the listing cached
(nmt/data/text_files.py:_tar_files) and with every open listing it again (as before), in one process.

    python scripts/bench_tarball_opens.py --tarball big.tgz --source-lang en --target-lang fr [--out results/x.json]

Make a tarball from the built-in corpus: python scripts/bench_tarball_opens.py --make big.tgz --copies 12
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nmt.data.text_files as text_files  # noqa: E402
from nmt.config import DataConfig  # noqa: E402
from nmt.data.sources import corpus_fingerprint, corpus_spec, read_pairs  # noqa: E402
from results_record import write_record  # noqa: E402


def make_tarball(path: Path, corpus_zip: Path, copies: int) -> None:
    """The built-in pairs `copies` times (each copy's sentences numbered apart), as two files in a .tgz."""
    with zipfile.ZipFile(corpus_zip) as archive:
        lines = archive.read("fra-eng/fra.txt").decode("utf-8").splitlines()
    sides = [[line.split("\t")[side] + f" {copy}" for copy in range(copies) for line in lines] for side in (0, 1)]
    with tarfile.open(path, "w:gz") as tar:
        for language, side in zip(("en", "fr"), sides):
            data = ("\n".join(side) + "\n").encode("utf-8")
            info = tarfile.TarInfo(f"training/corpus.fr-en.{language}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def measure(cfg: DataConfig, work: Path) -> dict:
    listings = []
    listed = tarfile.TarFile.getmembers

    def counted(archive):
        listings.append(1)
        return listed(archive)

    tarfile.TarFile.getmembers = counted
    try:
        started = time.perf_counter()
        spec = corpus_spec(cfg, work)
        corpus_fingerprint(spec, None)
        fingerprinted = time.perf_counter()
        pairs = read_pairs(spec)
        next(iter(pairs))
        first = time.perf_counter()
    finally:
        tarfile.TarFile.getmembers = listed
    return {"listings": len(listings), "fingerprint_s": round(fingerprinted - started, 2),
            "first_pair_s": round(first - fingerprinted, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tarball", type=Path)
    parser.add_argument("--source-lang", default="en")
    parser.add_argument("--target-lang", default="fr")
    parser.add_argument("--make", type=Path, help="write a tarball of the built-in corpus here, then stop")
    parser.add_argument("--corpus-zip", type=Path, default=Path("../shared/data/fra-eng.zip"))
    parser.add_argument("--copies", type=int, default=12)
    parser.add_argument("--out", type=Path, help="also write the figures as a results/ record")
    args = parser.parse_args()
    if args.make:
        make_tarball(args.make, args.corpus_zip, args.copies)
        return
    cfg = DataConfig(source_file=str(args.tarball), target_file=str(args.tarball), source_lang=args.source_lang,
                     target_lang=args.target_lang)
    cached = text_files._tar_files
    figures = {"tarball": str(args.tarball), "tarball_bytes": args.tarball.stat().st_size}
    text_files._tar_files = cached.__wrapped__  # every open lists the archive again, as before
    figures["listed_at_every_open"] = measure(cfg, args.tarball.parent)
    text_files._tar_files = cached
    cached.cache_clear()
    figures["listed_once"] = measure(cfg, args.tarball.parent)
    print(json.dumps(figures, indent=1))
    if args.out:
        write_record(args.out, **figures)


if __name__ == "__main__":
    main()
