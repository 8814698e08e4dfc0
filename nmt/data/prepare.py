"""`nmt prepare`: corpus → normalized pairs → split → SentencePiece → encoded arrays + manifest."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from nmt.config import DataConfig, fingerprint_settings
from nmt.data.corpus import normalize_pairs, read_pairs
from nmt.data.normalizer import Normalizer
from nmt.data.download import corpus_path, sha256_file
from nmt.data.split import SPLITS, group_references, split_pairs
from nmt.data.tokenizer import JOINT_MODEL, SOURCE_MODEL, TARGET_MODEL, Tokenizers, train_sentencepiece
from nmt.errors import NMTError
from nmt.lock import DirectoryLock

MANIFEST = "manifest.json"
FORMAT_VERSION = 1


def data_settings(cfg: DataConfig) -> dict:
    return fingerprint_settings(cfg)


def prepared_dir(cfg: DataConfig, data_dir: Path, corpus_sha256: str) -> Path:
    blob = json.dumps({"format": FORMAT_VERSION, "corpus": corpus_sha256, **data_settings(cfg)}, sort_keys=True)
    return Path(data_dir) / "prepared" / hashlib.sha256(blob.encode()).hexdigest()[:12]


def find_prepared(cfg: DataConfig, data_dir: Path) -> Path:
    """The prepared directory for `cfg`, which must exist (translate/evaluate never prepare data themselves)."""
    corpus = corpus_path(data_dir)
    if not corpus.is_file():
        raise NMTError(f"corpus not found at {corpus}; run `nmt download` (or pass --data-dir)")
    corpus_sha256 = sha256_file(corpus)
    directory = prepared_dir(cfg, data_dir, corpus_sha256)
    if not is_prepared(directory, cfg, corpus_sha256):
        raise NMTError(f"no prepared data for these settings under {data_dir}; run `nmt prepare`")
    return directory


def read_manifest(directory: Path) -> dict | None:
    try:
        return json.loads((Path(directory) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_prepared(directory: Path, cfg: DataConfig, corpus_sha256: str) -> bool:
    manifest = read_manifest(directory)
    return (manifest is not None and manifest.get("format") == FORMAT_VERSION
            and manifest.get("corpus_sha256") == corpus_sha256 and manifest.get("settings") == data_settings(cfg))


def prepare(cfg: DataConfig, data_dir: Path, force: bool = False, log=print) -> Path:
    """Prepare the data for `cfg` (skipped when an up-to-date manifest exists); return its directory."""
    corpus = corpus_path(data_dir)
    if not corpus.is_file():
        raise NMTError(f"corpus not found at {corpus}; run `nmt download` first")
    corpus_sha256 = sha256_file(corpus)
    target = prepared_dir(cfg, data_dir, corpus_sha256)
    if not force and is_prepared(target, cfg, corpus_sha256):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with DirectoryLock(data_dir, wait=True):
        if not force and is_prepared(target, cfg, corpus_sha256):  # another process finished it meanwhile
            return target
        for stale in target.parent.glob(".*"):  # staging of a killed prepare (we hold the lock: not live)
            shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            started = time.perf_counter()
            manifest = _build(cfg, corpus, staging, log)
            manifest.update(corpus_sha256=corpus_sha256, seconds=round(time.perf_counter() - started, 2))
            _write_json(staging / MANIFEST, manifest)
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _build(cfg: DataConfig, corpus: Path, out: Path, log) -> dict:
    normalizer = Normalizer(lowercase_source=cfg.lowercase_source)
    pairs, dropped = normalize_pairs(read_pairs(corpus), normalizer, cfg.max_words)
    splits = split_pairs(pairs, cfg.split_salt, cfg.valid_fraction, cfg.test_fraction)
    empty = [name for name, split in splits.items() if not split]
    if empty:
        raise NMTError(f"the {' and '.join(empty)} split would be empty ({len(pairs)} usable pairs): use a larger "
                       "corpus or raise data.valid_fraction / data.test_fraction")
    tokenizers = _train_tokenizers(cfg, splits["train"], out)
    counts = {}
    dropped["too_many_pieces"] = 0
    for name in splits:
        splits[name], src_ids, tgt_ids = _encode_and_filter(splits[name], tokenizers, cfg.max_pieces, dropped)
        _save_split(src_ids, tgt_ids, tokenizers, out / f"{name}.npz")
    log(f"pairs kept {sum(map(len, splits.values()))} (dropped {dropped}); "
        + ", ".join(f"{name} {len(p)}" for name, p in splits.items()))
    for name, split in splits.items():
        counts[name] = {"pairs": len(split), "sources": len({en for en, _ in split})}
        if name != "train":
            _write_references(group_references(split), out / f"{name}.jsonl")
    return {"format": FORMAT_VERSION, "settings": data_settings(cfg), "dropped": dropped, "counts": counts,
            "tokenizer_files": Tokenizers.files(cfg.joint_vocab),
            "normalizer": dataclasses.asdict(normalizer)}


def _train_tokenizers(cfg: DataConfig, train: list[tuple[str, str]], out: Path) -> Tokenizers:
    options = dict(vocab_size=cfg.vocab_size, model_type=cfg.tokenizer_type, byte_fallback=cfg.byte_fallback,
                   character_coverage=cfg.character_coverage)
    if cfg.joint_vocab:
        sentences = [en for en, _ in train] + [fr for _, fr in train]
        train_sentencepiece(sentences, out / JOINT_MODEL, **options)
    else:
        train_sentencepiece([en for en, _ in train], out / SOURCE_MODEL, **options)
        train_sentencepiece([fr for _, fr in train], out / TARGET_MODEL, **options)
    return Tokenizers.from_dir(out)


def _encode_and_filter(pairs: list[tuple[str, str]], tokenizers: Tokenizers, max_pieces: int, dropped: dict):
    """Encode both sides; pairs with more than `max_pieces` pieces on a side go (positions and memory are bounded)."""
    threads = os.cpu_count() or 1
    src = tokenizers.source.encode([en for en, _ in pairs], out_type=int, num_threads=threads)
    tgt = tokenizers.target.encode([fr for _, fr in pairs], out_type=int, num_threads=threads)
    keep = [i for i in range(len(pairs)) if len(src[i]) <= max_pieces and len(tgt[i]) <= max_pieces]
    dropped["too_many_pieces"] += len(pairs) - len(keep)
    return [pairs[i] for i in keep], [src[i] for i in keep], [tgt[i] for i in keep]


def _pack(ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Ragged lists of ids → (flat tokens, offsets); sentence i is tokens[offsets[i]:offsets[i+1]]."""
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    tokens = np.fromiter((t for x in ids for t in x), dtype=np.int32, count=int(offsets[-1]))
    return tokens, offsets


def _save_split(src_ids: list[list[int]], tgt_ids: list[list[int]], tokenizers: Tokenizers, path: Path) -> None:
    (src_tokens, src_offsets), (tgt_tokens, tgt_offsets) = _pack(src_ids), _pack(tgt_ids)
    dtype = np.uint16 if max(tokenizers.source.get_piece_size(), tokenizers.target.get_piece_size()) <= 65536 \
        else np.int32
    np.savez(path, src_tokens=src_tokens.astype(dtype), src_offsets=src_offsets,
             tgt_tokens=tgt_tokens.astype(dtype), tgt_offsets=tgt_offsets)


def _write_references(groups: list[tuple[str, list[str]]], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for source, refs in groups:
            handle.write(json.dumps({"source": source, "references": refs}, ensure_ascii=False) + "\n")


def _write_json(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def split_sizes_report(directory: Path) -> str:
    manifest = read_manifest(directory) or {}
    counts = manifest.get("counts", {})
    return ", ".join(f"{s}: {counts[s]['sources']} sources / {counts[s]['pairs']} pairs" for s in SPLITS if s in counts)


def ensure_prepared(cfg: DataConfig, data_dir: Path, url: str | None = None, log=print, force: bool = False) -> Path:
    """Download and prepare whatever is missing (what `nmt train` runs first); return the prepared directory."""
    from nmt.data.download import download_corpus  # local import: only this entry point downloads

    if not corpus_path(data_dir).is_file():
        download_corpus(url or cfg.corpus_url, data_dir, cfg.corpus_sha256 if cfg.verify_checksum else None)
    return prepare(cfg, data_dir, force=force, log=log)
