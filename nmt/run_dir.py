"""A run directory is self-contained: config, environment, tokenizer(s), normalization, checkpoints, metrics.

`Run` owns every path in it, the checkpoint schema and the lock; nothing else names these files (the formats of the two
logs are `nmt.run_logs`'s).

    runs/<name>/config.yaml  env.json  normalizer.json  spm.model  metrics.jsonl  train.log  .lock
               checkpoints/{last,best,averaged}.pt   eval/<label>.{hyp.txt,report.json}
               tensorboard/  (train.tensorboard: the metrics as TensorBoard scalars)
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import os
import platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Iterator

import yaml

from nmt import __version__
from nmt.atomic import copy_file_atomic, is_being_written, unwritable_reason, write_text_atomic
from nmt.config import Config, data_order_settings, fingerprint_settings, from_dict, model_args, read_yaml, to_dict
from nmt.data.normalizer import Normalizer
from nmt.data.sources import languages
from nmt.data.tokenizer import Tokenizers
from nmt.errors import ConfigError, NMTError
from nmt.lock import DirectoryLock
from nmt.run_logs import MetricsLog

if TYPE_CHECKING:
    import torch

# torch (and nmt.checkpoint, which needs it) is imported where a checkpoint is written or read, not here: finding a
# run, and refusing a missing one, should not wait ~2 s for torch to load.

DEFAULT_ROOT = Path("runs")
EXPORT_METADATA = "nmt_export.json"  # marks an `nmt export` directory (nmt.ct2_engine reads it)

# Checkpoint schema (torchtune style): every key a checkpoint may hold, by name. `Weights` and `TrainingState`
# below are the only code that turns these into payloads and back.
MODEL_KEY, MODEL_ARGS_KEY, CONFIG_KEY, VERSION_KEY = "model", "model_args", "config", "nmt_version"
OPTIMIZER_KEY, SCHEDULER_KEY, SCALER_KEY, RNG_KEY, PROGRESS_KEY = "optimizer", "scheduler", "scaler", "rng", "progress"
STEP_KEY, DEV_BLEU_KEY, AVERAGED_FROM_KEY = "step", "dev_bleu", "averaged_from"
TRAINED_MODEL_KEY = "trained_model"  # last.pt under train.ema_decay: the trained weights (MODEL_KEY: their average)
TRAINING_KEYS = (MODEL_KEY, CONFIG_KEY, OPTIMIZER_KEY, SCHEDULER_KEY, SCALER_KEY, RNG_KEY, PROGRESS_KEY)
WEIGHTS_KEYS = (MODEL_KEY, CONFIG_KEY)
_STEP_FILE = re.compile(r"step-(\d+)\.pt")
_LISTING_ATTEMPTS = 5  # a training removes a step checkpoint once a save: a second listing is all but always enough


class CheckpointKind(str, enum.Enum):
    """The named checkpoints of a run (step checkpoints, `step-<step>.pt`, are counted, not named)."""

    LAST = "last"  # everything needed to resume exactly
    BEST = "best"  # weights with the best dev BLEU so far
    AVERAGED = "averaged"  # `nmt average`: the mean of the newest step checkpoints


@dataclass
class Weights:
    """What every checkpoint holds: the model's tensors and how to rebuild and describe it."""

    model: dict
    config: dict
    model_args: dict | None = None
    nmt_version: str | None = None
    step: int | None = None
    dev_bleu: float | None = None
    dev_metric: dict | None = None  # best.pt: {train.best_metric: its value} when it was saved
    averaged_from: list | None = None

    def payload(self) -> dict:
        """The plain dict torch.save writes (None fields left out; tensors are not copied)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_payload(cls, state: dict):
        return cls(**{f.name: state.get(f.name) for f in dataclasses.fields(cls)})


@dataclass
class TrainingState(Weights):
    """`last.pt`: the weights plus optimizer, scheduler, scaler, every rank's RNG states and the progress counters.
    Under train.ema_decay `model` is the average, which translates like any checkpoint's, and `trained_model` the
    weights the optimizer trains, which a resume goes on from."""

    trained_model: dict | None = None
    optimizer: dict | None = None
    scheduler: dict | None = None
    scaler: dict | None = None
    rng: object = None
    progress: dict | None = None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _export_is_no_run(directory: Path) -> NMTError:
    return NMTError(f"{directory} is a CTranslate2 export (`nmt export`), not a run: translate, evaluate and serve "
                    f"take it as --engine ctranslate2 --model {directory}")


def checkpoint_name(checkpoint: Path | str | None) -> str | None:
    """`--checkpoint last` (best, averaged, step-0001000): a bare name, no file here, names RUN/checkpoints/NAME.pt of
    the run given (or the newest); anything else is a checkpoint file. None when it is a file."""
    if checkpoint is None:
        return None
    path = Path(checkpoint)
    return path.name if not path.suffix and len(path.parts) == 1 and not path.exists() else None


@dataclass(frozen=True)
class Run:
    directory: Path

    # --- finding runs -------------------------------------------------------------------------------------------
    @classmethod
    def for_config(cls, cfg: Config, directory: Path | None = None) -> "Run":
        return cls(Path(directory) if directory is not None else DEFAULT_ROOT / cfg.name)

    @classmethod
    def open(cls, directory: Path | None = None, root: Path = DEFAULT_ROOT) -> "Run":
        """An existing run: `directory`, or the most recently trained one under `root`."""
        run = cls(Path(directory)) if directory is not None else cls.latest(root)
        if not run.config_path.is_file():
            if (run.directory / EXPORT_METADATA).is_file():
                raise _export_is_no_run(run.directory)
            raise NMTError(f"{run.directory} is not a run directory (no config.yaml); train one with "
                           "`nmt train --config demo`")
        return run

    @classmethod
    def latest(cls, root: Path = DEFAULT_ROOT) -> "Run":
        saved = {}  # run directory -> the time of its newest save
        for path in Path(root).glob("*/checkpoints/*.pt"):
            try:
                mtime = path.stat().st_mtime
            except FileNotFoundError:  # a training's rotation removed it since the listing (train.keep_last)
                continue
            saved[path.parent.parent] = max(mtime, saved.get(path.parent.parent, mtime))
        if not saved:
            raise NMTError(f"no trained run found under {root}/; train one with `nmt train --config demo`")
        return cls(max(saved, key=saved.get))

    # --- paths --------------------------------------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.directory / "config.yaml"

    @property
    def env_path(self) -> Path:
        return self.directory / "env.json"

    @property
    def normalizer_path(self) -> Path:
        return self.directory / "normalizer.json"

    @property
    def log_path(self) -> Path:
        return self.directory / "train.log"

    @property
    def tensorboard_path(self) -> Path:  # event files derived from metrics.jsonl (train.tensorboard)
        return self.directory / "tensorboard"

    @property
    def eval_dir(self) -> Path:
        return self.directory / "eval"

    @property
    def checkpoint_dir(self) -> Path:
        return self.directory / "checkpoints"

    @property
    def metrics(self) -> MetricsLog:
        return MetricsLog(self.directory / "metrics.jsonl")

    def checkpoint_path(self, which: CheckpointKind | str) -> Path:
        return self.checkpoint_dir / f"{CheckpointKind(which).value}.pt"

    def prepared_data(self) -> Path | None:
        """Where this run's training data was prepared (env.json; relative to the working directory in runs made
        before it was recorded absolute), or None when not recorded."""
        recorded = self._read_env().get("prepared_data")
        return Path(recorded) if isinstance(recorded, str) and recorded else None

    def _read_env(self) -> dict:
        try:
            env = json.loads(self.env_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return env if isinstance(env, dict) else {}

    # --- writing ------------------------------------------------------------------------------------------------
    def initialize(self, cfg: Config, prepared: Path, device: torch.device, world_size: int,
                   init_from: dict | None = None) -> None:
        """Write the resolved config, the environment, and copies of the tokenizer(s) and normalization settings.
        `init_from`: the weights a fine-tuned run started from (None on resume: the record already there stays)."""
        import torch

        from nmt.data.prepare import prepared_normalizer  # training's alone: translate and serve load no preparation

        if init_from is None:
            init_from = self._read_env().get("init_from")
        self._make_dirs()
        write_text_atomic(self.config_path, yaml.safe_dump(to_dict(cfg), sort_keys=False))
        env = {"nmt": __version__, "torch": torch.__version__, "python": platform.python_version(),
               "device": str(device),
               "cuda_device": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
               "world_size": world_size, "git_commit": _git_commit(), "prepared_data": str(Path(prepared).resolve()),
               **({"init_from": init_from} if init_from else {})}
        write_text_atomic(self.env_path, json.dumps(env, indent=2) + "\n")
        for name in Tokenizers.files(cfg.data.joint_vocab):
            copy_file_atomic(prepared / name, self.directory / name)
        normalizer = prepared_normalizer(Path(prepared), cfg.data)  # the text's own: data prepared before may differ
        write_text_atomic(self.normalizer_path, json.dumps(normalizer.__dict__) + "\n")

    def check_usable(self) -> None:
        """Fail before any work (data preparation included) when the run directory cannot be one."""
        if self.directory.exists() and not self.directory.is_dir():
            raise NMTError(f"{self.directory} exists and is not a directory")
        reason = unwritable_reason(self.directory)
        if reason:
            doing = "write in" if self.directory.is_dir() else "create"  # a finished run on a read-only disk exists
            raise NMTError(f"cannot {doing} the run directory {self.directory}: {reason}")

    @property
    def holds_foreign_config(self) -> bool:
        """Whether the folder's config.yaml is not nmt's: a run's start writes env.json beside it, always."""
        return self.config_path.is_file() and not self.env_path.is_file()

    def check_holds_no_foreign_config(self) -> None:
        """A folder whose config.yaml nmt did not write is no run: training writes its resolved config there, and a
        config kept in the folder with its comments (`nmt train -c exp/config.yaml --run-dir exp`) was replaced
        without a word."""
        if self.holds_foreign_config:
            raise NMTError(f"{self.config_path} is not a run's (no env.json beside it), and training writes the run's "
                           "config there: keep your config outside the run directory, or choose another --run-dir")

    def check_apart_from(self, data_dir: Path) -> None:
        """The run's directory is not the data directory: a run written there put its checkpoints, config.yaml and
        logs among the corpus and its preparations, and `nmt runs` listed the data as a run. (A folder of its own
        inside the data directory, or a data directory inside the run's, keeps the two apart.)"""
        if self.directory.resolve() == Path(data_dir).resolve():
            raise NMTError(f"the run directory {self.directory} is the data directory: give the run a directory of its "
                           "own (runs/NAME by default)")

    def _make_dirs(self) -> None:
        for directory in (self.directory, self.checkpoint_dir):
            if directory.exists() and not directory.is_dir():
                raise NMTError(f"{directory} exists and is not a directory")
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise NMTError(f"cannot create {directory}: {err.strerror}") from None
        if not os.access(self.directory, os.W_OK):
            raise NMTError(f"run directory {self.directory} is not writable")

    def lock(self) -> DirectoryLock:
        """Held for a whole training: a second training of this run is refused."""
        self._make_dirs()
        return DirectoryLock(self.directory)

    def save(self, which: CheckpointKind | str, checkpoint: Weights) -> Path:
        from nmt.checkpoint import save_checkpoint

        path = self.checkpoint_path(which)
        save_checkpoint(checkpoint.payload(), path)
        return path

    def step_checkpoints(self) -> list[Path]:
        """checkpoints/step-<step>.pt, oldest first (other files there, e.g. a stray step-latest.pt, are not)."""
        found = [(int(m.group(1)), p) for p in self.checkpoint_dir.glob("step-*.pt")
                 if (m := _STEP_FILE.fullmatch(p.name))]
        return [p for _, p in sorted(found)]

    @contextlib.contextmanager
    def opened_step_checkpoints(self, newest: int) -> Iterator[list[tuple[Path, BinaryIO]]]:
        """The newest `newest` step checkpoints, each opened for reading. A training beside the reader saves on and
        removes its oldest (train.keep_last) between the listing and the reads; a file once opened stays readable
        when its name goes (POSIX), so a listing is taken again only while one of its files vanishes before it opens."""
        for _ in range(_LISTING_ATTEMPTS):
            with contextlib.ExitStack() as opened:
                try:
                    files = [(path, opened.enter_context(path.open("rb")))
                             for path in self.step_checkpoints()[-newest:]]
                except FileNotFoundError:
                    continue
                yield files
                return
        raise NMTError(f"the step checkpoints of {self.directory} were replaced {_LISTING_ATTEMPTS} times while "
                       "being opened (a training saving very often beside this command?); run it again")

    def save_step(self, step: int, checkpoint: Weights, keep: int) -> None:
        """Weights of this step, keeping only the newest `keep` such files."""
        from nmt.checkpoint import save_checkpoint

        save_checkpoint(checkpoint.payload(), self.checkpoint_dir / f"step-{step:07d}.pt")
        for old in self.step_checkpoints()[:-keep]:
            old.unlink(missing_ok=True)

    def clean_stale_temp_files(self) -> list[Path]:
        """Temp files a killed process left (a checkpoint being written, a config being replaced); not one another
        process is writing now (`nmt average`'s averaged.pt beside a training that starts)."""
        found = {p for d in (self.directory, self.checkpoint_dir) if d.is_dir() for p in d.glob(".*.tmp")}
        found |= set(self.checkpoint_dir.glob(".*.pt.*")) if self.checkpoint_dir.is_dir() else set()
        stale = sorted(path for path in found if not is_being_written(path))
        for path in stale:
            path.unlink(missing_ok=True)
        return stale

    # --- reading ------------------------------------------------------------------------------------------------
    def read_config(self) -> Config:
        raw = read_yaml(self.config_path)
        try:
            return from_dict(raw)
        except ConfigError as err:
            raise NMTError(f"{self.config_path}: {err}") from None

    def read_normalizer(self) -> Normalizer:
        try:
            return Normalizer(**json.loads(self.normalizer_path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError) as err:
            raise NMTError(f"cannot read {self.normalizer_path}: {err}") from None

    def tokenizers(self) -> Tokenizers:
        return Tokenizers.from_dir(self.directory)

    def load_weights(self, path: Path, handle: BinaryIO | None = None) -> Weights:
        return Weights.from_payload(self.load(path, handle=handle))

    def load_training(self, path: Path) -> TrainingState:
        return TrainingState.from_payload(self.load(path, required=TRAINING_KEYS))

    def load(self, path: Path, required: tuple[str, ...] = WEIGHTS_KEYS, handle: BinaryIO | None = None) -> dict:
        """A checkpoint as a dict with at least `required` keys; anything else is a one-line error naming the file.
        Read from `handle` where given (see `opened_step_checkpoints`)."""
        from nmt.checkpoint import load_checkpoint

        return _checked(load_checkpoint(path, map_location="cpu", handle=handle), path, required)

    def peek(self, path: Path) -> TrainingState:
        """What a checkpoint says of itself (config, step, progress) without reading its tensors' bytes or verifying
        them (see `peek_checkpoint`): not for weights that will be used."""
        from nmt.checkpoint import peek_checkpoint

        return TrainingState.from_payload(_checked(peek_checkpoint(path), path, WEIGHTS_KEYS))

    @classmethod
    def of_checkpoint(cls, directory: Path | None, checkpoint: Path | None) -> "Run":
        """The run to translate with: `directory`, else the one a checkpoint file sits in (RUN/checkpoints/X.pt),
        else the newest (see `open`; a checkpoint by name is one of that run's)."""
        if directory is None and checkpoint is not None and checkpoint_name(checkpoint) is None:
            folder = Path(checkpoint).parent
            if (folder / EXPORT_METADATA).is_file():  # a file of an export: model.bin, say
                raise _export_is_no_run(folder)
            if not Path(checkpoint).is_file():
                raise NMTError(f"checkpoint not found: {checkpoint}")
            if folder.name != "checkpoints":
                raise NMTError(f"{checkpoint} is not in a run's checkpoints/ folder: pass --run RUN, the run it was "
                               "trained in, for its config and tokenizer")
            directory = folder.parent
        return cls.open(directory)

    def find_checkpoint(self, checkpoint: Path | None = None) -> tuple[Path, CheckpointKind | None]:
        """The checkpoint to translate with and its kind (None for an explicit file): `checkpoint`, else averaged,
        best, then last; a one-line error if there is none. Reads no checkpoint (and imports no torch)."""
        if checkpoint is not None:
            name = checkpoint_name(checkpoint)
            if name is not None:
                checkpoint = self.checkpoint_dir / f"{name}.pt"
                if not checkpoint.is_file():
                    saved = ", ".join(sorted(path.stem for path in self.checkpoint_dir.glob("*.pt"))) or "none"
                    raise NMTError(f"{self.directory} has no checkpoint named {name} (it has: {saved})")
            if not Path(checkpoint).is_file():
                raise NMTError(f"checkpoint not found: {checkpoint}")
            return Path(checkpoint), None
        for which in (CheckpointKind.AVERAGED, CheckpointKind.BEST, CheckpointKind.LAST):
            path = self.checkpoint_path(which)
            if path.is_file():
                return path, which
        if self.holds_foreign_config:  # training refuses to write over it: the advice below would be refused
            raise NMTError(f"{self.directory} holds a config.yaml but no run (no env.json); train it into a folder "
                           f"of its own: `nmt train --config {self.config_path} --run-dir runs/NAME`")
        # The run has its config already: training it (again: it resumes) is the way on, whatever its data.
        raise NMTError(f"no checkpoint in {self.directory} yet; train it with `nmt train --config "
                       f"{self.config_path} --run-dir {self.directory}`")

    def choose_checkpoint(self, checkpoint: Path | None = None) -> tuple[Path, str | None]:
        """(checkpoint to translate with, warning or None): see `find_checkpoint`.

        A `last.pt` saved after the newest validation was never scored: say so rather than silently prefer best.
        """
        path, which = self.find_checkpoint(checkpoint)
        if which is None:
            return path, None
        warning = None
        last = self.checkpoint_path(CheckpointKind.LAST)
        if which is CheckpointKind.AVERAGED and last.is_file():
            averaged_step, last_step = _saved_step(self, path), _saved_step(self, last)
            if averaged_step is not None and last_step is not None and last_step > averaged_step:
                warning = (f"using averaged.pt (up to step {averaged_step}); training went on to step {last_step} "
                           "since: run `nmt average` again to include it")
        if which is CheckpointKind.BEST and last.is_file():
            best_step = _saved_step(self, path)
            last_step = _saved_step(self, last)
            if best_step is not None and last_step is not None and last_step > best_step:
                validated = [r["step"] for r in self.metrics.split()[1]] if self.metrics.path.is_file() else []
                unscored = not validated or max(validated) < last_step
                if unscored:
                    warning = (f"using best.pt (step {best_step}); last.pt (step {last_step}) is newer and was never "
                               f"validated: pass --checkpoint {last} to use it")
        return path, warning

    def check_translatable(self, weights: Weights, cfg: Config, tokenizers: Tokenizers, path: Path) -> None:
        """The twin of `check_resumable` for translating: a checkpoint translates only with the tokenizer it was
        trained with, and `--run A --checkpoint` of another run B would feed B's model A's piece ids (an IndexError
        past B's vocabulary, or fluent nonsense within it)."""
        own = Path(path).resolve().parent == self.checkpoint_dir.resolve()
        again = (f"{self.directory}/config.yaml or its tokenizer changed after training?" if own else
                 "translate it with the run it came from (--checkpoint alone when it sits in RUN/checkpoints/)")
        args, have = weights.model_args, (tokenizers.source.get_piece_size(), tokenizers.target.get_piece_size())
        if args is not None and (args.get("src_vocab"), args.get("tgt_vocab")) != have:
            raise NMTError(f"{path} was trained with a vocabulary of {args.get('src_vocab'):,}/"
                           f"{args.get('tgt_vocab'):,} source/target pieces, but {self.directory} has "
                           f"{have[0]:,}/{have[1]:,}: {again}")
        if not isinstance(weights.config, dict):
            return
        try:
            saved = from_dict(weights.config, Config).data
            differences = (("languages", languages(saved), languages(cfg.data)),
                           ("data settings", fingerprint_settings(saved), fingerprint_settings(cfg.data)))
        except NMTError:  # a config of a far older release: the vocabulary check above is what can be told
            return
        for what, old, new in differences:
            if old != new:
                raise NMTError(f"{path} was trained on other data than {self.directory} ({what} differ): {again}")

    def check_resumable(self, saved: dict, cfg: Config) -> list[str]:
        """Refuse a config whose model shape or data differ from the checkpoint's; warn when the data order changes.

        Saved configs from older versions lack newer fields: a missing field counts as its default.
        """
        saved_cfg = from_dict(saved, Config) if isinstance(saved, dict) else None
        if saved_cfg is None:
            raise NMTError(f"{self.directory}: checkpoint has no config")
        pairs = [("model", model_args(saved_cfg.model), model_args(cfg.model)),
                 ("data", fingerprint_settings(saved_cfg.data), fingerprint_settings(cfg.data))]
        for section, old, new in pairs:
            for key in sorted(set(old) | set(new)):
                if old.get(key) != new.get(key):
                    raise NMTError(f"{self.directory} was trained with {section}.{key}={old.get(key)!r} but the "
                                   f"config says {new.get(key)!r}; use another --run-dir or the original setting")
        warnings = []
        if saved_cfg.train.init_from != cfg.train.init_from:
            now, then = (repr(c.train.init_from) if c.train.init_from else "unset" for c in (cfg, saved_cfg))
            warnings.append(f"train.init_from is {now} here, {then} when this run started: it only starts a new run, "
                            "and this one resumes from its last.pt")
        old_order, new_order = data_order_settings(saved_cfg.train), data_order_settings(cfg.train)
        for key in old_order:
            if old_order[key] != new_order[key]:
                warnings.append(f"train.{key} changed from {old_order[key]!r} to {new_order[key]!r}: the batches "
                                "after the resumed step differ from the original run's (resume is not exact)")
        return warnings


def _saved_step(run: Run, path: Path) -> int | None:
    """The step a checkpoint was saved at (last.pt keeps it in its progress counters), or None if unreadable."""
    try:
        state = run.peek(path)
    except NMTError:
        return None
    return state.progress.get("step") if isinstance(state.progress, dict) else state.step


def _checked(state: object, path: Path, required: tuple[str, ...]) -> dict:
    """`state` if it is an nmt checkpoint with at least `required` keys; else a one-line error naming the file."""
    if not isinstance(state, dict):
        raise NMTError(f"{path} is not an nmt checkpoint (holds a {type(state).__name__})")
    missing = [k for k in required if k not in state]
    if missing:
        hint = " (a weights-only checkpoint such as best.pt cannot resume training)" \
            if OPTIMIZER_KEY in missing and MODEL_KEY in state else ""
        raise NMTError(f"{path} is not a complete nmt checkpoint: missing {', '.join(missing)}{hint}")
    if not isinstance(state[CONFIG_KEY], dict) or not isinstance(state[CONFIG_KEY].get("model"), dict):
        raise NMTError(f"{path} has no usable config section")
    return state
