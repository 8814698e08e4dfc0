"""RUN/tensorboard: the run's metrics as TensorBoard scalars (`train.tensorboard: true`), as JoeyNMT writes them into
every model directory and fairseq with --tensorboard-logdir.

metrics.jsonl stays the record of truth; the event files are derived from it. Each training session rewrites them:
the old files go, every train and valid record the log holds is written again, and the session's records follow as
they are made. A resumed run then shows what its metrics.jsonl holds (trimmed to the checkpoint it resumed from),
never the steps of a session killed after its last checkpoint twice over, and turning the option on mid-run shows
the run from its first step. Every number of a record is a scalar named `<type>/<key>` (train/loss, train/lr,
train/tokens_per_s, train/mfu, valid/dev_bleu, valid/dev_loss, ...) at the record's step, and at the time the record
was made (its `wall_time`), so that TensorBoard's wall and relative axes show a rewritten session as it ran.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Iterable

from nmt.errors import NMTError

MIRRORED_TYPES = ("train", "valid")  # start and checkpoint records hold seconds of set-up and waiting, not curves
WALL_TIME_KEY = "wall_time"  # a record's Unix time: the event's wall time (an axis, not a curve)
_EVENT_FILE_PREFIX = "events.out.tfevents."
_FLUSH_SECONDS = 10  # a TensorBoard watching the run sees a window at most this late


def check_available() -> None:
    """Refuse `train.tensorboard` before any work when the package that writes event files is missing."""
    if importlib.util.find_spec("tensorboard") is None:
        raise NMTError("train.tensorboard needs the tensorboard package: pip install 'nmt[tensorboard]' "
                       "(or set train.tensorboard: false)")


def scalars(record: dict) -> list[tuple[str, float]]:
    """The (tag, value) pairs of a metrics record: each number of it but its step (flags and names are not curves)."""
    if record.get("type") not in MIRRORED_TYPES:
        return []
    return [(f"{record['type']}/{key}", float(value)) for key, value in record.items()
            if key not in ("type", "step", WALL_TIME_KEY) and isinstance(value, (int, float))
            and not isinstance(value, bool)]


class TensorBoardLog:
    """The event files of one training session: opened over the records metrics.jsonl holds, then one `add` per
    record made. Only rank 0 opens one."""

    def __init__(self, directory: Path, records: Iterable[dict]):
        check_available()
        from torch.utils.tensorboard import SummaryWriter  # imports tensorboard: only when asked for

        if directory.is_symlink() or (directory.exists() and not directory.is_dir()):
            raise NMTError(f"{directory} is not a directory nmt made for TensorBoard; move it away")
        for stale in directory.glob(f"{_EVENT_FILE_PREFIX}*"):
            stale.unlink()  # derived from metrics.jsonl, which is written again below
        self.writer = SummaryWriter(log_dir=str(directory), flush_secs=_FLUSH_SECONDS)
        for record in records:
            self.add(record)
        self.writer.flush()

    def add(self, record: dict) -> None:
        """A record's scalars at its step and at the time it was made (now for a log older than the key)."""
        made = record.get(WALL_TIME_KEY)
        for tag, value in scalars(record):
            self.writer.add_scalar(tag, value, global_step=record["step"],
                                   walltime=made if isinstance(made, (int, float)) else None)

    def close(self) -> None:
        self.writer.close()  # flushes what is buffered
