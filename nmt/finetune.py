"""Starting a run from another: its tokenizer (`data.tokenizer_from`) and its weights (`train.init_from`).

Fine-tuning needs both: weights translate only with the piece ids they were trained on, and only text normalized
as their run normalized it. So a new run with `train.init_from: runs/parent` prepares its own corpus with the
parent's SentencePiece model(s) and normalization, then starts from the parent's weights with a fresh optimizer,
schedule and step (fairseq's --finetune-from-model, JoeyNMT's load_model with its resets).

    cfg = with_borrowed_tokenizer(cfg, run)    # the data section on the tokenizer this training uses
    record = load_parent_weights(model, cfg)   # a new run's first weights; what env.json records
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from nmt.config import Config, from_dict, model_args, subword_sampling_refused
from nmt.data.download import user_path
from nmt.data.normalizer import Normalizer
from nmt.data.sources import languages
from nmt.data.tokenizer import JOINT_MODEL, files_digest
from nmt.errors import NMTError
from nmt.run_dir import CheckpointKind, Run, Weights

if TYPE_CHECKING:
    import torch

NORMALIZATION = tuple(f.name for f in dataclasses.fields(Normalizer))
# The settings a tokenizer was made with: a borrowed tokenizer brings its own (recorded, not applied).
VOCABULARY = ("vocab_size", "joint_vocab", "tokenizer_type", "byte_fallback", "character_coverage")


def parent_run(init_from: str, key: str = "train.init_from") -> tuple[Run, Path | None]:
    """The run `init_from` names (a run directory, or a checkpoint file in RUN/checkpoints/) and that file, if one."""
    path = user_path(init_from, key)  # `~/runs/base`, as data.corpus takes it
    if not path.exists():  # a mistyped checkpoint file is no "run directory without config.yaml"
        raise NMTError(f"{key}: {path} does not exist (give a run directory, or a checkpoint file in its checkpoints/)")
    try:
        if path.is_file():
            if path.parent.name != "checkpoints":
                raise NMTError(f"{path} is not in a run's checkpoints/ folder: give the run directory it was trained "
                               "in (its tokenizer and normalization come with it)")
            return Run.of_checkpoint(None, path), path
        return Run.open(path), None
    except NMTError as err:
        raise NMTError(f"{key}: {err}") from None


def with_borrowed_tokenizer(cfg: Config, run: Run | None = None, log: Callable[[str], None] | None = None) -> Config:
    """`cfg` with its data section on the tokenizer it trains with, when that is borrowed: for a new run (or `nmt
    prepare`, `run` None) from `data.tokenizer_from`, else `train.init_from`; for a run that resumes, from the run's
    own copy when it borrowed one (the run it came from may be gone or retrained since). Unchanged otherwise."""
    if run is not None and run.checkpoint_path(CheckpointKind.LAST).is_file():
        return _borrow(cfg, run, None) if run.read_config().data.tokenizer_sha256 else cfg
    if cfg.data.tokenizer_sha256 and not cfg.data.tokenizer_from:
        raise NMTError("data.tokenizer_sha256 is filled in by nmt from data.tokenizer_from: set that too, or neither")
    source = _new_run_source(cfg)
    return _borrow(cfg, source, log) if source is not None else cfg


def _new_run_source(cfg: Config) -> Run | None:
    weights = parent_run(cfg.train.init_from)[0] if cfg.train.init_from else None
    tokenizer = parent_run(cfg.data.tokenizer_from, "data.tokenizer_from")[0] if cfg.data.tokenizer_from else None
    if weights and tokenizer and _digest(weights) != _digest(tokenizer):
        raise NMTError(f"data.tokenizer_from {tokenizer.directory} has another tokenizer than train.init_from "
                       f"{weights.directory}, whose weights need their own: leave data.tokenizer_from unset")
    return tokenizer or weights


def _digest(run: Run) -> str:
    return files_digest(run.directory, (run.directory / JOINT_MODEL).is_file())


def _borrow(cfg: Config, source: Run, log: Callable[[str], None] | None) -> Config:
    """The data section on `source`'s tokenizer: its vocabulary settings recorded, its normalization for every unset
    side (an explicit one must agree: the tokenizer and any weights saw text normalized that way)."""
    normalizer = source.read_normalizer()
    conflicts = [f"data.{name} is {ours} here but {theirs} in {source.directory}" for name in NORMALIZATION
                 if (ours := getattr(cfg.data, name)) is not None and ours != (theirs := getattr(normalizer, name))]
    if conflicts:
        raise NMTError(f"{'; '.join(conflicts)}: text must be normalized as the run whose tokenizer this one takes "
                       "normalized it (unset it to follow that run)")
    digest = _digest(source)
    if cfg.data.tokenizer_sha256 and cfg.data.tokenizer_sha256 != digest:
        raise NMTError(f"the tokenizer in {source.directory} is not the one data.tokenizer_sha256 names (changed "
                       "since?): remove data.tokenizer_sha256 to take the one there now")
    theirs = source.read_config().data
    vocabulary = {name: getattr(theirs, name) for name in VOCABULARY}
    vocabulary["joint_vocab"] = (source.directory / JOINT_MODEL).is_file()  # the files decide, whatever it says
    replaced = [f"data.{name}={vocabulary[name]}" for name in VOCABULARY if getattr(cfg.data, name) != vocabulary[name]]
    if log:
        ours, theirs_pair = "→".join(languages(cfg.data)), "→".join(languages(theirs))
        notes = [f"{', '.join(replaced)}, as it was made"] if replaced else []
        notes += [f"it translates {theirs_pair}, this run {ours}"] if ours != theirs_pair else []
        log(f"tokenizer and normalization of {source.directory}" + (f" ({'; '.join(notes)})" if notes else ""))
    data = dataclasses.replace(cfg.data, **vocabulary, **dataclasses.asdict(normalizer),
                               tokenizer_from=str(source.directory.resolve()), tokenizer_sha256=digest)
    if refused := subword_sampling_refused(data):
        raise NMTError(f"the tokenizer of {source.directory} is data.tokenizer_type {data.tokenizer_type}: {refused}")
    return dataclasses.replace(cfg, data=data)


def check_parent_shape(cfg: Config) -> None:
    """Refuse `train.init_from` weights of another shape than `cfg.model` from what their checkpoint says of itself
    (no tensors read): before a corpus is prepared, which can take minutes that the refusal would then waste."""
    run, checkpoint = parent_run(cfg.train.init_from)
    path, _ = run.find_checkpoint(checkpoint)
    _check_same_shape(cfg, run.peek(path).config, path)


def _check_same_shape(cfg: Config, parent_config: dict, path: Path) -> None:
    theirs = model_args(from_dict(parent_config, Config).model)
    differences = [f"model.{name} {value!r} here, {theirs.get(name)!r} there"
                   for name, value in model_args(cfg.model).items() if theirs.get(name) != value]
    if differences:
        raise NMTError(f"train.init_from: {path} is a model of another shape ({'; '.join(differences)}): set the "
                       "model section as the parent's")


def load_parent_weights(model: torch.nn.Module, cfg: Config) -> dict:
    """Load `train.init_from`'s weights into `model` (a model of the same shape: refused otherwise); return what
    env.json records of them (the file, its step and dev BLEU, which the log's first lines say too)."""
    from nmt.models.builder import upgrade_state_dict

    run, checkpoint = parent_run(cfg.train.init_from)
    if cfg.data.tokenizer_sha256 != _digest(run):  # the weights would meet other piece ids, silently at equal size
        raise NMTError(f"train.init_from: the data is not on {run.directory}'s tokenizer (a config that did not go "
                       "through nmt.finetune.with_borrowed_tokenizer, as nmt.train.train's does)")
    path, _ = run.find_checkpoint(checkpoint)
    state = run.load(path)
    weights = Weights.from_payload(state)
    run.check_translatable(weights, run.read_config(), run.tokenizers(), path)
    _check_same_shape(cfg, weights.config, path)
    try:
        model.load_state_dict(upgrade_state_dict(weights.model))
    except (KeyError, RuntimeError, ValueError, TypeError) as err:
        raise NMTError(f"train.init_from: {path} does not fit this model: {str(err).splitlines()[0]}") from None
    progress = state.get("progress")
    step = weights.step if weights.step is not None else progress.get("step") if isinstance(progress, dict) else None
    return {"checkpoint": str(path.resolve()), "step": step, "dev_bleu": weights.dev_bleu}


def starting_from(record: dict) -> str:
    """The line a fine-tuned run opens with: which weights it starts from (`load_parent_weights`'s record)."""
    scored = f", dev BLEU {record['dev_bleu']:.2f}" if record.get("dev_bleu") is not None else ""
    step = f" (step {record['step']:,}{scored})" if record.get("step") is not None else ""
    return f"starting from {record['checkpoint']}{step}: its weights, with a new optimizer, schedule and step"
