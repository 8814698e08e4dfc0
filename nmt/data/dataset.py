"""Prepared data as loaded by training, translation and evaluation."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nmt.errors import NMTError


@dataclass
class ParallelArrays:
    """Encoded pairs: sentence i is tokens[offsets[i]:offsets[i+1]] on each side (no BOS/EOS)."""

    src_tokens: np.ndarray
    src_offsets: np.ndarray
    tgt_tokens: np.ndarray
    tgt_offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    @property
    def src_lengths(self) -> np.ndarray:
        return np.diff(self.src_offsets)

    @property
    def tgt_lengths(self) -> np.ndarray:
        return np.diff(self.tgt_offsets)

    def source(self, i: int) -> np.ndarray:
        return self.src_tokens[self.src_offsets[i]:self.src_offsets[i + 1]]

    def target(self, i: int) -> np.ndarray:
        return self.tgt_tokens[self.tgt_offsets[i]:self.tgt_offsets[i + 1]]


def load_arrays(directory: Path, split: str) -> ParallelArrays:
    path = Path(directory) / f"{split}.npz"
    if not path.is_file():
        raise NMTError(f"prepared split not found: {path}; run `nmt prepare`")
    with np.load(path) as data:
        return ParallelArrays(**{key: data[key] for key in ("src_tokens", "src_offsets", "tgt_tokens", "tgt_offsets")})


def load_references(directory: Path, split: str) -> tuple[list[str], list[list[str]]]:
    """Sources and their reference lists (every French translation of each English sentence)."""
    path = Path(directory) / f"{split}.jsonl"
    if not path.is_file():
        raise NMTError(f"references not found: {path}; run `nmt prepare`")
    sources, references = [], []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            sources.append(row["source"])
            references.append(row["references"])
    return sources, references
