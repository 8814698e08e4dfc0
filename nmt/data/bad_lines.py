"""Lines of a training corpus of one's own that hold no pair (data.bad_lines): an error that names the first one, or,
with `skip`, each read as an empty pair (dropped with the others, so two aligned files stay aligned), counted, and
the first few named in prepare's log, as pandas' `read_csv(on_bad_lines="skip")` does: for a crawled corpus of millions
of lines with a handful of broken ones (a missing tab, a byte that is not UTF-8, a cut JSON line).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from nmt.errors import NMTError, counted

NAMED = 3  # bad lines quoted in the log; the rest are counted
MOST_LINES_BAD = 0.5  # over this share of the lines, a file is in another format or encoding, not a few broken lines


@dataclass
class BadLines:
    """Where a reader meets a line with no pair: `meet` raises its message (data.bad_lines: error) or counts it, by
    file; `counting` counts the pairs read, which each file's bad lines are a share of (a pair is a line of each)."""

    skip: bool = False
    first: list[str] = field(default_factory=list)
    by_file: Counter = field(default_factory=Counter)  # bad lines met, by file
    first_by_file: dict[str, str] = field(default_factory=dict)
    read: int = 0
    fix: str = ""  # said after an error's own words: how to skip instead, where one can

    def meet(self, message: str, path: Path | str) -> None:
        if not self.skip:
            raise NMTError(f"{message}{self.fix}")
        self.by_file[str(path)] += 1
        self.first_by_file.setdefault(str(path), message)
        if len(self.first) < NAMED:
            self.first.append(message)

    @property
    def count(self) -> int:
        return sum(self.by_file.values())

    def counting(self, pairs: Iterable[tuple[str, str]]) -> Iterator[tuple[str, str]]:
        for pair in pairs:
            self.read += 1
            yield pair

    def summary(self) -> str | None:
        """For prepare's log, once the corpus is read through `counting`; None: no bad line met. Raises where most
        lines of a file are bad: skipping them would train on what is left of a misread file. Told per file: two
        aligned files bad at the same lines lost those pairs once, not twice."""
        if not self.count:
            return None
        path, worst = self.by_file.most_common(1)[0]
        if worst > MOST_LINES_BAD * self.read:
            raise NMTError(f"{worst:,} of {counted(self.read, 'line')} of {path} hold no pair (data.bad_lines: skip): "
                           "the text is in another encoding or format than it is read as; the first: "
                           f"{self.first_by_file[path]}")
        more = f"; {self.count - len(self.first):,} more" if self.count > len(self.first) else ""
        return (f"skipped {counted(self.count, 'bad line')} (data.bad_lines: skip; counted with the empty pairs): "
                + "; ".join(self.first) + more)


RAISE = BadLines()  # every bad line an error: data.bad_lines error, and held-out files of one's own, scored whole
