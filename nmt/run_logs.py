"""A run's two logs: metrics.jsonl (`MetricsLog`: one JSON record per line, what plots, reports and TensorBoard read)
and train.log (`TrainingLog`: every line `nmt train` says, with its time)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Callable

from nmt.atomic import write_text_atomic
from nmt.errors import NMTError


def finite_or_null(value):
    """`value` with every NaN or infinite number in it (in dicts and lists too) as None: JSON has no such numbers,
    and Python's NaN and Infinity in a metrics line broke every strict reader (jq, JSON.parse)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(item) for item in value]
    return value


RECORD_TYPES = ("train", "valid", "checkpoint", "start")  # log windows, validations, checkpoint waits, sessions


class MetricsLog:
    """metrics.jsonl: one JSON record per line, `type` train, valid, checkpoint or start (a session's setup seconds),
    each with its `step`; the only code that reads or writes it."""

    def __init__(self, path: Path):
        self.path = path

    def append(self, record: dict) -> None:
        if self.path.is_symlink():
            raise NMTError(f"{self.path} is a symbolic link; refusing to write through it")
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(finite_or_null(record), allow_nan=False) + "\n")

    def records(self) -> list[dict]:
        """Every complete record, of every type; a torn last line (a kill mid-write) is skipped, as is a line that
        is no record of this log (a hand edit, another tool's: its step no whole number)."""
        if not self.path.is_file():
            raise NMTError(f"no metrics in {self.path.parent} (train first)")
        out = []
        for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if (isinstance(record, dict) and record.get("type") in RECORD_TYPES
                    and type(record.get("step")) is int):  # bool is an int subclass; no step count
                out.append(record)
        return out

    def split(self) -> tuple[list[dict], list[dict]]:
        records = self.records()
        return [r for r in records if r["type"] == "train"], [r for r in records if r["type"] == "valid"]

    def trim_after(self, step: int) -> int:
        """Drop records after `step` (written after the checkpoint a resume starts from); return how many."""
        if not self.path.is_file():
            return 0
        records = self.records()
        kept = [r for r in records if r["step"] <= step]
        lines = self.path.read_text(encoding="utf-8", errors="replace").count("\n")
        if len(kept) != len(records) or lines != len(records):
            write_text_atomic(self.path, "".join(json.dumps(finite_or_null(r), allow_nan=False) + "\n" for r in kept))
        return len(records) - len(kept)


class TrainingLog:
    """RUN/train.log: every line `nmt train` says, with its time (data, resumes, validations, warnings, why it
    stopped), kept with the run as JoeyNMT's train.log is. Lines are held until the run is set up (`start`), so a
    training refused before that (bad input) writes nothing; after it, an error ending training is recorded too."""

    def __init__(self, path: Path, echo: Callable[[str], None]):
        self.path, self.echo = path, echo
        self.started = False
        self._held: list[str] = []

    def __call__(self, message: str) -> None:
        self.echo(message)
        self._write(message)

    def start(self) -> None:
        self.started = True
        self._write(None)

    def record(self, message: str) -> None:
        """A line for the file alone (what the command line prints itself, such as its error)."""
        if self.started:
            self._write(message)

    def _write(self, message: str | None) -> None:
        if message is not None:
            self._held.append(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}\n")
        if not self.started:
            return
        try:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.writelines(self._held)
        except OSError:
            pass  # a convenience copy: a full disk is the checkpoints' to report, not the log's
        self._held.clear()
