"""`nmt prepare`: corpus → normalized pairs → split → SentencePiece → encoded arrays + manifest."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Callable

from nmt.atomic import install_dir, staging_dir
from nmt.config import DataConfig, fingerprint_settings
from nmt.data import stream
from nmt.data.bad_lines import BadLines
from nmt.data.corpus import normalize_pairs
from nmt.data.download import check_data_dir_writable, sha256_file
from nmt.data.normalizer import Normalizer
from nmt.data.sources import (CorpusSpec, corpus_fingerprint, corpus_spec, heldout_pairs, read_pairs,
                              resolve_normalizer, tagged_reading)
from nmt.data.split import SPLITS
from nmt.data.subword_sampling import SubwordSampling
from nmt.data.tokenizer import (JOINT_MODEL, SOURCE_MODEL, TARGET_MODEL, Tokenizers, files_digest,
                                train_sentencepiece)
from nmt.errors import NMTError, counted
from nmt.lock import DirectoryLock

MANIFEST = "manifest.json"
# 2: streamed preparation, token shards that training memory-maps (1: one .npz per split, read whole).
FORMAT_VERSION = 2


def data_settings(cfg: DataConfig) -> dict:
    return fingerprint_settings(cfg)


def prepared_dir(cfg: DataConfig, data_dir: Path, corpus_sha256: str) -> Path:
    # The name keeps the first format's number: the same settings and text name the same directory in every release
    # (a directory of an older format is rebuilt in place, to identical splits and ids).
    blob = json.dumps({"format": 1, "corpus": corpus_sha256, **data_settings(cfg)}, sort_keys=True)
    return Path(data_dir) / "prepared" / hashlib.sha256(blob.encode()).hexdigest()[:12]


def _identity(cfg: DataConfig, data_dir: Path) -> tuple[CorpusSpec, str]:
    """The resolved corpus and the hash that names its text (the built-in corpus: fra.txt's sha256, as before)."""
    spec = corpus_spec(cfg, data_dir)
    if spec.kind == "builtin" and not spec.files[0].is_file():
        raise NMTError(f"corpus not found at {spec.files[0]}; run `nmt download` (or pass --data-dir)")
    builtin_sha = sha256_file(spec.files[0]) if spec.kind == "builtin" else None
    return spec, corpus_fingerprint(spec, builtin_sha)


def find_prepared(cfg: DataConfig, data_dir: Path, trained_on: Path | None = None,
                  warn: Callable[[str], None] | None = None, config_file: Path | None = None) -> Path:
    """The prepared directory for `cfg`, which must exist (translate/evaluate never prepare data themselves): the one
    under `data_dir`, else `trained_on` (where a run was trained, from its env.json) while that still holds data of
    these settings, so that a run trained with `--data-dir` elsewhere is evaluated without repeating it.
    `config_file`, the run's config, makes the error's `nmt prepare` command one that prepares this data."""
    directory = None
    try:
        _, corpus_sha256 = _identity(cfg, data_dir)
        directory = prepared_dir(cfg, data_dir, corpus_sha256)
        if is_prepared(directory, cfg, corpus_sha256):
            return directory
        command = f"nmt prepare --config {config_file} --data-dir {data_dir}" if config_file else "nmt prepare"
        why = f"no prepared data for these settings under {data_dir}"
        missing = f"{why}; run `{command}`"
        older = older_format(directory, cfg, corpus_sha256)
        if older is not None:
            why = f"{directory} holds these settings' data in an older nmt's format ({older}; this one reads " \
                  f"{FORMAT_VERSION})"
            missing = f"{why}; run `{command}` to rebuild it in place (the same split and token ids)"
    except NMTError as err:  # e.g. no built-in corpus under data_dir
        why = missing = str(err)
    if trained_on is not None:
        if is_prepared(trained_on, cfg, None):
            if warn:
                warn(f"{why}: using {trained_on}, where the run was trained")
            return trained_on
        if older_format(trained_on, cfg, None) is None:
            missing += f" (the run was trained on {trained_on}, which no longer holds that data)"
        elif Path(trained_on) != directory:  # the same directory's older format is said above
            missing += f" (the run was trained on {trained_on}, which holds it in an older nmt's format)"
    raise NMTError(missing)


def older_format(directory: Path, cfg: DataConfig, corpus_sha256: str | None) -> int | None:
    """The format of `directory`'s data where an older nmt prepared it from these settings and this text (None:
    not so); `prepare` rebuilds it in place."""
    manifest = read_manifest(directory)
    if manifest is None or manifest.get("format") == FORMAT_VERSION or manifest.get("settings") != data_settings(cfg):
        return None
    return manifest.get("format") if corpus_sha256 in (None, manifest.get("corpus_sha256")) else None


def run_data_for_resume(cfg: DataConfig, data_dir: Path, trained_on: Path) -> Path | None:
    """The data a resumed run goes on with: `data_dir`'s own of these settings, else `trained_on` (its env.json)
    while it holds data of these settings from the same text, which preparing again would only reproduce. So a run
    resumed from another working directory neither prepares nor downloads again, and the corpus is hashed once.
    None: prepare as for a new run."""
    if not is_prepared(trained_on, cfg, None):
        return None
    spec = corpus_spec(cfg, data_dir)  # a file of the config that is gone is still an error, as for a new run
    if spec.kind == "builtin" and not spec.files[0].is_file():
        # Not downloaded under data_dir: its checksum names the text (a different release, or held-out files of
        # the user's own, cannot be told without it).
        if spec.heldout or not cfg.verify_checksum:
            return None
        corpus_sha256 = cfg.corpus_sha256
    else:
        corpus_sha256 = corpus_fingerprint(spec, sha256_file(spec.files[0]) if spec.kind == "builtin" else None)
    for directory in (prepared_dir(cfg, data_dir, corpus_sha256), trained_on):
        if is_prepared(directory, cfg, corpus_sha256):
            return directory
    return None


def read_manifest(directory: Path) -> dict | None:
    try:
        return json.loads((Path(directory) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_prepared(directory: Path, cfg: DataConfig, corpus_sha256: str | None) -> bool:
    """`directory` holds data of `cfg`'s settings in this format, from the text `corpus_sha256` names (None: from
    whichever text: a run's own data, where its env.json says, whose corpus may have changed since)."""
    manifest = read_manifest(directory)
    own_heldout = bool(cfg.valid_source_file or cfg.test_source_file)
    return (manifest is not None and manifest.get("format") == FORMAT_VERSION
            and corpus_sha256 in (None, manifest.get("corpus_sha256"))
            and manifest.get("settings") == data_settings(cfg)
            and (not own_heldout or "heldout" in manifest))  # before: long held-out pairs dropped, prepared again


def prepare(cfg: DataConfig, data_dir: Path, force: bool = False, log=print) -> Path:
    """Prepare the data for `cfg` (skipped when an up-to-date manifest exists); return its directory."""
    spec, corpus_sha256 = _identity(cfg, data_dir)
    target = prepared_dir(cfg, data_dir, corpus_sha256)
    if not force and is_prepared(target, cfg, corpus_sha256):
        return target
    check_data_dir_writable(data_dir, "prepare these settings' data")
    target.parent.mkdir(parents=True, exist_ok=True)
    with DirectoryLock(data_dir, wait=True):
        if not force and is_prepared(target, cfg, corpus_sha256):  # another process finished it meanwhile
            return target
        for stale in target.parent.glob(".*"):  # staging of a killed prepare (we hold the lock: not live)
            shutil.rmtree(stale, ignore_errors=True)
        staging = staging_dir(target)
        try:
            started = time.perf_counter()
            manifest = _build(cfg, spec, staging, log)
            manifest.update(corpus_sha256=corpus_sha256, seconds=round(time.perf_counter() - started, 2))
            _write_json(staging / MANIFEST, manifest)
            install_dir(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


LARGE_HELDOUT = 10_000  # pairs in a hashed valid/test split: prepare's log names data.max_heldout_sources


def _build(cfg: DataConfig, spec: CorpusSpec, out: Path, log) -> dict:
    """Stream the corpus through three passes in bounded memory (nmt/data/stream.py): normalized, deduplicated text
    per split; SentencePiece on (a sample of) the training text; encoded shards."""
    workers = os.cpu_count() or 1
    heldout, heldout_report = _read_heldout(cfg, spec, log)
    bad = BadLines(skip=cfg.bad_lines == "skip", fix=" (or data.bad_lines: skip drops the pairs of such lines)")
    text, dropped, counts = stream.write_split_text(bad.counting(read_pairs(spec, log, bad)), spec.normalizer, cfg,
                                                    heldout, out, workers)
    skipped = bad.summary()
    if skipped:
        log(skipped)
    _hold_out(cfg, text, counts, heldout, log)
    _check_no_split_empty(spec, counts, dropped)
    tokenizers = _train_tokenizers(cfg, text["train"], out)
    encoded = _encode_splits(cfg, text, counts, heldout, tokenizers, out, workers, dropped)
    split_counts = {name: {"pairs": split.kept, "sources": split.sources} for name, split in encoded.items()}
    for files in text.values():
        for path in files:
            path.unlink()
    log(f"pairs kept {sum(c['pairs'] for c in split_counts.values())} (dropped {dropped}); "
        + ", ".join(f"{name} {c['pairs']}" for name, c in split_counts.items()))
    vocabulary = {"source": tokenizers.source.get_piece_size(), "target": tokenizers.target.get_piece_size()}
    log(vocabulary_summary(vocabulary, cfg.vocab_size, cfg.joint_vocab, cfg.tokenizer_from))
    unknown = unknown_summary(encoded["train"])
    if unknown:
        log(unknown)
    if encoded["train"].drawn_shards:
        log(drawn_summary(encoded["train"], cfg))
    return {"format": FORMAT_VERSION, "settings": data_settings(cfg), "dropped": dropped, "counts": split_counts,
            **({"bad_lines": bad.count} if bad.skip else {}),  # of the empty pairs dropped
            "vocabulary": vocabulary,
            # Held-out files of one's own are scored whole (no length filter): older data dropped their long pairs.
            **({"heldout": heldout_report} if heldout else {}),
            "source_lang": spec.source_lang, "target_lang": spec.target_lang,
            "shards": {name: split.shards for name, split in encoded.items()},
            # Subword sampling's draws of the training pairs: epoch e trains on draw e mod their number.
            **({"drawn_train_shards": encoded["train"].drawn_shards} if encoded["train"].drawn_shards else {}),
            "tokenizer_files": Tokenizers.files(cfg.joint_vocab),
            "normalizer": dataclasses.asdict(spec.normalizer)}


def _read_heldout(cfg: DataConfig, spec: CorpusSpec, log) -> tuple[dict, dict]:
    """The valid and test files of one's own (data.valid_source_file, ...), read whole: their pairs and a report
    each; a file that holds no pair after normalization is refused."""
    heldout, report = {}, {}
    for name, files in spec.heldout.items():
        heldout[name], report[name] = _heldout_pairs(files, spec, cfg.max_words)
        if not heldout[name]:
            read_as = report[name].get("read_as")
            why = f"it holds no sentence, read as {read_as}" if read_as else "every line is empty"
            raise NMTError(f"{files[0]}: no {name} pairs left after normalization ({why})")
        log(_heldout_summary(name, files[0], report[name], cfg.max_words))
    return heldout, report


def _hold_out(cfg: DataConfig, text: dict, counts: dict, heldout: dict, log) -> None:
    """The split held-out text capped at data.max_heldout_sources source sentences (the rest trains), or, uncapped,
    a held-out split large enough to slow every validation said."""
    if cfg.max_heldout_sources:
        cut = stream.cap_heldout(text, counts, cfg.max_heldout_sources, cfg.split_salt, heldout)
        for name, (sources, moved, pairs) in cut.items():
            log(f"{name}: {cfg.max_heldout_sources:,} of its {sources:,} source sentences held out "
                f"(data.max_heldout_sources); the other {moved:,} ({counted(pairs, 'pair')}) train")
        return
    for name in (name for name in SPLITS if name != "train" and name not in heldout):
        if counts[name] > LARGE_HELDOUT:
            log(f"{name}: {counts[name]:,} pairs held out ({getattr(cfg, name + '_fraction'):.1%} of the "
                f"source sentences), each decoded at every {'validation' if name == 'valid' else 'evaluation'}: "
                "data.max_heldout_sources N holds out N sentences (a WMT test set: ~3,000)")


def _check_no_split_empty(spec: CorpusSpec, counts: dict, dropped: dict) -> None:
    if not sum(counts.values()):
        raise NMTError(f"{' and '.join(map(str, spec.files))}: no sentence pairs left after normalization and "
                       f"filtering (dropped {dropped})")
    empty = [name for name in SPLITS if not counts[name]]
    if empty:
        usable = counted(sum(counts.values()), "usable pair")
        raise NMTError(f"the {' and '.join(empty)} split would be empty ({usable}): use a larger corpus or raise "
                       "data.valid_fraction / data.test_fraction")


def _encode_splits(cfg: DataConfig, text: dict, counts: dict, heldout: dict, tokenizers: Tokenizers, out: Path,
                   workers: int, dropped: dict) -> dict:
    """Each split's text encoded into shards (the training split filtered by data.max_pieces and
    data.max_length_ratio; held-out files of one's own scored whole); what the filters dropped is added to
    `dropped`, and a split they empty is refused."""
    dropped["too_many_pieces"] = 0
    encoded = {}
    for name in SPLITS:
        ratio = cfg.max_length_ratio if name == "train" else 0.0  # a filter of training text: held-out is scored
        encoded[name] = stream.encode_split(text[name], tokenizers, cfg.max_pieces, out, name, workers,
                                            score_every_pair=name in heldout, max_length_ratio=ratio,
                                            sampling=subword_sampling(cfg) if name == "train" else None)
        dropped["too_many_pieces"] += counts[name] - encoded[name].kept - encoded[name].unlike
        if ratio:
            dropped["length_ratio"] = encoded[name].unlike
    emptied = [name for name in SPLITS if not encoded[name].kept]
    if emptied:
        filters = " and ".join(f"data.{key} {getattr(cfg, key):g}" for key in ("max_pieces", "max_length_ratio")
                               if getattr(cfg, key))
        lost = dropped["too_many_pieces"] + dropped.get("length_ratio", 0)
        names = " and ".join([", ".join(emptied[:-1]), emptied[-1]] if len(emptied) > 1 else emptied)
        raise NMTError(f"the {names} split{'s' if len(emptied) > 1 else ''} would be empty after "
                       f"{filters} dropped {lost:,} pairs (longer than that many pieces, or sides that far apart in "
                       "length): raise it")
    return encoded


def prepared_normalizer(directory: Path, cfg: DataConfig) -> Normalizer:
    """The normalization the prepared text in `directory` went through: what its runs must translate with. A manifest
    from before joiners were kept records no keep_joiners (its Normalizer default: stripped); one from before
    manifests recorded their normalizer had them stripped too."""
    recorded = (read_manifest(directory) or {}).get("normalizer")
    if recorded is None:
        return dataclasses.replace(resolve_normalizer(cfg), keep_joiners=False)
    return Normalizer(**recorded)


def _heldout_pairs(files: tuple[Path, Path], spec: CorpusSpec, max_words: int) -> tuple[list, dict]:
    """A valid/test set of one's own, normalized and kept whole: the length filters bound training, and a test set
    cut by them would not be the one the user scores elsewhere (its BLEU would not compare). Only empty pairs, which
    cannot be scored, and exact repeats (one item either way: a source's references are gathered) are left out."""
    pairs, dropped = normalize_pairs(heldout_pairs(files, spec), spec.normalizer, max_words=2**62)
    dropped.pop("too_long")  # none, with no length limit
    over = sum(1 for source, target in pairs if max(len(source.split()), len(target.split())) > max_words)
    report = {"source_file": str(files[0]), "pairs": len(pairs), "over_max_words": over, "dropped": dropped}
    read_as = tagged_reading(files[0], spec.source_lang, spec.target_lang)  # a test set's XML: said, as read
    return pairs, report | ({"read_as": read_as} if read_as else {})


def _heldout_summary(name: str, source_file: Path, report: dict, max_words: int) -> str:
    notes = [f"{counted(report['over_max_words'], 'pair')} over data.max_words={max_words} kept"] \
        if report["over_max_words"] else []
    notes += [f"{counted(n, why + ' pair')} left out" for why, n in report["dropped"].items() if n]
    read_as = f" (read as {report['read_as']})" if report.get("read_as") else ""
    return f"{name}: {counted(report['pairs'], 'pair')} from {source_file}{read_as}, scored whole" + \
        (f" ({'; '.join(notes)})" if notes else "")


def unknown_summary(train: stream.EncodedSplit) -> str | None:
    """For prepare's log, where the training text holds <unk> (a word vocabulary's unseen words; characters outside
    data.character_coverage without byte fallback): how much of each side, which the model learns to emit as " ⁇ "."""
    if not any(train.unknown):
        return None
    shares = [f"{unknown / max(pieces, 1):.2%} of the {side}'s {pieces:,}"
              for side, unknown, pieces in zip(("source", "target"), train.unknown, train.pieces)]
    return (f"unknown pieces (<unk>) in the training text: {shares[0]}, {shares[1]} (a larger data.vocab_size, or "
            "data.byte_fallback with a subword model, leaves fewer)")


def subword_sampling(cfg: DataConfig) -> SubwordSampling | None:
    return SubwordSampling(cfg.subword_alpha, cfg.subword_nbest, cfg.subword_samples) \
        if cfg.subword_alpha else None


def drawn_summary(train: stream.EncodedSplit, cfg: DataConfig) -> str:
    """How much longer the drawn segmentations are than the best: training reads that many more pieces a pair."""
    best = sum(train.pieces)
    longer = [sum(pieces) / best - 1 if best else 0.0 for pieces in train.drawn_pieces]
    return (f"train: {cfg.subword_samples} drawn segmentations (data.subword_alpha {cfg.subword_alpha:g} among the "
            f"{cfg.subword_nbest} best), {min(longer):+.1%} to {max(longer):+.1%} pieces against the best one")


def vocabulary_summary(sizes: dict[str, int], requested: int, joint: bool, borrowed_from: str = "") -> str:
    """The pieces SentencePiece made, and why there are fewer than data.vocab_size asks for when there are: on a
    small corpus it stops where the text runs out of pieces (hard_vocab_limit=False) rather than fail. A borrowed
    tokenizer (data.tokenizer_from) was made on its run's text: that run is named instead."""
    kinds = [("", sizes["source"])] if joint else [("source ", sizes["source"]), ("target ", sizes["target"])]
    parts = [f"{kind}{size:,} pieces" for kind, size in kinds]
    if borrowed_from:
        why = f", {borrowed_from}'s (data.tokenizer_from)"
    else:
        why = f" (fewer than data.vocab_size={requested:,}: all this training text yields)" \
            if min(sizes.values()) < requested else ""
    return f"vocabulary: {', '.join(parts)}{'' if joint else ' (separate)'}{why}"


def _train_tokenizers(cfg: DataConfig, train: tuple[Path, Path], out: Path) -> Tokenizers:
    """SentencePiece on the training text (sampled down to input_sentence_size sentences by SentencePiece itself), or
    a copy of the run's that `data.tokenizer_from` names (nmt/finetune.py)."""
    if cfg.tokenizer_from:
        for name in Tokenizers.files(cfg.joint_vocab):
            shutil.copyfile(Path(cfg.tokenizer_from) / name, out / name)
        if files_digest(out, cfg.joint_vocab) != cfg.tokenizer_sha256:
            raise NMTError(f"the tokenizer in {cfg.tokenizer_from} changed while the data was prepared; run again")
        return Tokenizers.from_dir(out)
    options = dict(vocab_size=cfg.vocab_size, model_type=cfg.tokenizer_type, byte_fallback=cfg.byte_fallback,
                   character_coverage=cfg.character_coverage)
    source_text, target_text = train
    if cfg.joint_vocab:
        train_sentencepiece([source_text, target_text], out / JOINT_MODEL, **options)
    else:
        train_sentencepiece([source_text], out / SOURCE_MODEL, **options)
        train_sentencepiece([target_text], out / TARGET_MODEL, **options)
    return Tokenizers.from_dir(out)


def _write_json(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def split_sizes_report(directory: Path) -> str:
    manifest = read_manifest(directory) or {}
    counts = manifest.get("counts", {})
    return ", ".join(f"{s}: {counts[s]['sources']} sources / {counts[s]['pairs']} pairs" for s in SPLITS if s in counts)


def ensure_prepared(cfg: DataConfig, data_dir: Path, url: str | None = None, log=print, force: bool = False) -> Path:
    """Download and prepare whatever is missing (what `nmt train` runs first); return the prepared directory."""
    from nmt.data.download import download_corpus  # local import: only this entry point downloads

    from nmt.data.download import corpus_path
    from nmt.data.sources import builtin_corpus

    if builtin_corpus(cfg) is not None and not corpus_path(data_dir).is_file():
        download_corpus(url or cfg.corpus_url, data_dir, cfg.corpus_sha256 if cfg.verify_checksum else None)
    return prepare(cfg, data_dir, force=force, log=log)
