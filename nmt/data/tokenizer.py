"""SentencePiece subword models: training on the train split, loading, and id conventions."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm

from nmt.errors import NMTError

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
JOINT_MODEL, SOURCE_MODEL, TARGET_MODEL = "spm.model", "spm.src.model", "spm.tgt.model"


# SentencePiece reads at most this many sentences (a uniform sample of a larger corpus): its memory stays bounded
# (its suffix array over 2M sentences peaked above 2 GiB; 1M stays near 1 GiB — scripts/bench_prepare.py).
INPUT_SENTENCE_SIZE = 1_000_000


def train_sentencepiece(text_files: list[Path], model_path: Path, vocab_size: int, model_type: str,
                        byte_fallback: bool, character_coverage: float) -> Path:
    """Train one model on text files (one sentence a line, read in order and sampled by SentencePiece itself);
    normalization is ours (identity rule), so decode(encode(s)) == s on normalized text."""
    model_path = Path(model_path)
    prefix = model_path.with_suffix("")
    for path in (*text_files, prefix):
        if not is_utf8_name(path):
            # SentencePiece's trainer takes its paths as UTF-8 strings: this was an internal TypeError.
            raise NMTError(f"SentencePiece cannot train with a path that is not UTF-8: {os.fsencode(path)!r}; "
                           "rename the folder (or choose another --data-dir)")
    try:
        spm.SentencePieceTrainer.train(
            input=[str(p) for p in text_files], model_prefix=str(prefix), vocab_size=vocab_size,
            model_type=model_type, byte_fallback=byte_fallback, character_coverage=character_coverage,
            normalization_rule_name="identity", pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
            num_threads=os.cpu_count() or 1, input_sentence_size=INPUT_SENTENCE_SIZE, shuffle_input_sentence=True,
            hard_vocab_limit=False, minloglevel=2)
    except RuntimeError as err:
        raise NMTError(_training_failure(str(err), vocab_size, byte_fallback)) from None
    return model_path


def _training_failure(message: str, vocab_size: int, byte_fallback: bool) -> str:
    """SentencePiece's error in the config's terms. The usual one: a vocabulary smaller than the pieces it must hold
    (every character kept by data.character_coverage, and with data.byte_fallback the 256 byte pieces)."""
    too_small = re.search(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)", message)
    if too_small:
        needed = int(too_small.group(2))
        held = "256 byte pieces, every character kept and the markers" if byte_fallback else \
            "every character kept and the markers"
        fixes = "set data.byte_fallback: false or " if byte_fallback else ""
        return (f"SentencePiece training failed (data.vocab_size={vocab_size}): the vocabulary must hold at least "
                f"{needed} pieces ({held}); raise data.vocab_size to {needed} or more, {fixes}lower "
                "data.character_coverage")
    if "(vocab_size) >= (0)" in message:  # a char model's vocabulary cannot hold what it reserves
        reserved = "the 256 byte pieces and the 4 markers" if byte_fallback else "the 4 markers"
        fixes = ", or set data.byte_fallback: false" if byte_fallback else ""
        return (f"SentencePiece training failed (data.vocab_size={vocab_size}): the vocabulary must hold more than "
                f"{reserved}; raise data.vocab_size (a char model keeps the commonest characters up to it){fixes}")
    last_line = message.strip().splitlines()[-1] if message.strip() else "failed"
    return f"SentencePiece training failed (data.vocab_size={vocab_size}): {last_line}"


def is_utf8_name(path: Path | str) -> bool:
    """Whether `path` encodes as UTF-8, as the C++ libraries (SentencePiece, CTranslate2) take names: one of bytes
    that are not (a Latin-1 "caf\\xe9") is held by Python with surrogate escapes, which they refuse as a TypeError."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def load_sentencepiece(path: Path) -> spm.SentencePieceProcessor:
    if not Path(path).is_file():
        raise NMTError(f"SentencePiece model not found: {path}")
    try:
        # Its bytes, not its name: SentencePiece takes a name only as UTF-8, and a run in a folder named otherwise
        # (a Latin-1 name) was an internal TypeError.
        return spm.SentencePieceProcessor(model_proto=Path(path).read_bytes())
    except (RuntimeError, OSError) as err:
        raise NMTError(f"cannot load SentencePiece model {path}: {str(err).strip()[:120]}") from None


@dataclass
class Tokenizers:
    """Source and target subword models; the same object twice when the vocabulary is joint."""

    source: spm.SentencePieceProcessor
    target: spm.SentencePieceProcessor

    @property
    def joint(self) -> bool:
        return self.source is self.target

    @classmethod
    def from_dir(cls, directory: Path) -> "Tokenizers":
        directory = Path(directory)
        if (directory / JOINT_MODEL).is_file():
            joint = load_sentencepiece(directory / JOINT_MODEL)
            return cls(joint, joint)
        return cls(load_sentencepiece(directory / SOURCE_MODEL), load_sentencepiece(directory / TARGET_MODEL))

    @staticmethod
    def files(joint: bool) -> list[str]:
        return [JOINT_MODEL] if joint else [SOURCE_MODEL, TARGET_MODEL]


def files_digest(directory: Path, joint: bool) -> str:
    """sha256 over a directory's SentencePiece model file(s), named: what identifies a borrowed tokenizer."""
    digest = hashlib.sha256()
    for name in Tokenizers.files(joint):
        path = Path(directory) / name
        if not path.is_file():
            raise NMTError(f"SentencePiece model not found: {path}")
        digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def same_vocabulary(a: Tokenizers, b: Tokenizers) -> bool:
    """The same pieces under the same ids on both sides: what lets weights trained with `a` go on with `b` (the
    model files' bytes may differ when SentencePiece made them again from the same text)."""
    def pieces(model: spm.SentencePieceProcessor) -> list[str]:
        return model.id_to_piece(list(range(model.get_piece_size())))

    return a.joint == b.joint and pieces(a.source) == pieces(b.source) and pieces(a.target) == pieces(b.target)
