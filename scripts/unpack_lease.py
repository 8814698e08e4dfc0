"""Unpack a GPU phase's $OUT/PHASE.tgz (scripts/gpu_session.sh) in the repository, keeping earlier records.

    python scripts/unpack_lease.py /work/.device/1/lease.tgz

A lease names its records by what they measure, not by commit (results/gpu-time-to-dev-bleu50-lease-seed2-h200.json),
so unpacking a later lease of new code with `tar` would replace an earlier lease's record of that name, and with it
the evidence of another commit (the 2026-11-27 afternoon lease rewrote the 4f81733 seed 1 that made the H200's
3-seed median). Here a record about to be replaced by one of another commit is first kept under its commit's name,
NAME-COMMIT-SLUG.json, which scripts/gpu_report.py reads as NAME; the same commit's record is replaced (a step run
again). Everything else (gpu-session/ logs and markers) is extracted as `tar -xzf` would, refusing members that
would land outside the repository.
"""

from __future__ import annotations

import argparse
import json
import tarfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent


def kept_name(path: Path, commit: str) -> Path:
    """results/gpu-NAME-SLUG.json -> results/gpu-NAME-COMMIT-SLUG.json"""
    stem, slug = path.stem.rsplit("-", 1)
    return path.with_name(f"{stem}-{commit}-{slug}.json")


def unpack(archive: Path, root: Path = REPOSITORY) -> list[str]:
    """Extract `archive` under `root`; returns what was kept under a commit's name, one line each."""
    moves: list[tuple[Path, Path, str]] = []  # (record, its kept name, its commit)
    with tarfile.open(archive) as tar:
        # Every member checked before anything moves: absolute paths, '..' and links out of root are refused, and so
        # is a record whose kept name is taken (an earlier unpack kept a record of that commit there).
        members = [tarfile.data_filter(member, str(root)) for member in tar.getmembers()]
        for member in members:
            target = root / member.name
            if not (member.isfile() and member.name.startswith("results/gpu-") and target.exists()):
                continue
            incoming = json.load(tar.extractfile(member))
            existing = json.loads(target.read_text())
            if existing.get("commit") != incoming.get("commit"):
                keep = kept_name(target, existing["commit"])
                if keep.exists():
                    raise SystemExit(f"error: {keep.relative_to(root)} exists: {member.name} of the same commit "
                                     "would replace it; move one of them first")
                moves.append((target, keep, existing["commit"]))
        for target, keep, _ in moves:
            target.rename(keep)
        tar.extractall(root, members=members, filter="data")
    return [f"{target.relative_to(root)} ({commit}) kept as {keep.relative_to(root)}" for target, keep, commit in moves]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("archive", type=Path)
    for line in unpack(parser.parse_args().archive):
        print(line)


if __name__ == "__main__":
    main()
