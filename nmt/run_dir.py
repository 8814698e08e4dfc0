"""A run directory is self-contained: config, environment, tokenizer(s), normalization, checkpoints, metrics."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path

import torch
import yaml

from nmt import __version__
from nmt.checkpoint import load_checkpoint
from nmt.config import Config, from_dict, to_dict
from nmt.data.corpus import Normalizer
from nmt.data.tokenizer import Tokenizers
from nmt.device import autocast_dtype, pick_device
from nmt.errors import NMTError
from nmt.models import build_model
from nmt.translator import Translator

CONFIG_FILE, ENV_FILE, METRICS_FILE, NORMALIZER_FILE = "config.yaml", "env.json", "metrics.jsonl", "normalizer.json"
CHECKPOINT_DIR = "checkpoints"
SHAPE_KEYS = ("arch", "embed_dim", "hidden_size", "num_layers", "attention", "input_feeding", "num_heads", "ff_dim",
              "pre_norm", "tie_embeddings")
DATA_SHAPE_KEYS = ("vocab_size", "joint_vocab", "tokenizer_type", "lowercase_source")


def checkpoint_path(run_dir: Path, which: str) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR / f"{which}.pt"


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def initialize_run_dir(run_dir: Path, cfg: Config, prepared: Path, device: torch.device, world_size: int) -> None:
    """Write the resolved config, the environment, and copies of the tokenizer(s) and normalization settings."""
    run_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(run_dir / CONFIG_FILE, yaml.safe_dump(to_dict(cfg), sort_keys=False))
    env = {"nmt": __version__, "torch": torch.__version__, "python": platform.python_version(),
           "device": str(device), "cuda_device": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
           "world_size": world_size, "git_commit": _git_commit(), "prepared_data": str(prepared)}
    write_text_atomic(run_dir / ENV_FILE, json.dumps(env, indent=2) + "\n")
    for name in Tokenizers.files(cfg.data.joint_vocab):
        shutil.copyfile(prepared / name, run_dir / name)
    normalizer = Normalizer(lowercase_source=cfg.data.lowercase_source)
    write_text_atomic(run_dir / NORMALIZER_FILE, json.dumps(normalizer.__dict__) + "\n")


def read_run_config(run_dir: Path) -> Config:
    path = Path(run_dir) / CONFIG_FILE
    if not path.is_file():
        raise NMTError(f"{run_dir} is not a run directory (no {CONFIG_FILE}); train one with "
                       "`nmt train --config configs/demo.yaml`")
    return from_dict(yaml.safe_load(path.read_text(encoding="utf-8")))


def read_normalizer(run_dir: Path) -> Normalizer:
    return Normalizer(**json.loads((Path(run_dir) / NORMALIZER_FILE).read_text(encoding="utf-8")))


def check_compatible(saved: dict, cfg: Config, run_dir: Path) -> None:
    """A checkpoint can only continue with the same model shape and vocabulary."""
    for section, keys in (("model", SHAPE_KEYS), ("data", DATA_SHAPE_KEYS)):
        for key in keys:
            old, new = saved[section][key], getattr(getattr(cfg, section), key)
            if old != new:
                raise NMTError(f"{run_dir} was trained with {section}.{key}={old!r} but the config says {new!r}; "
                               "use another --run-dir or the original setting")


def latest_run(root: Path = Path("runs")) -> Path:
    candidates = [p.parent.parent for p in Path(root).glob(f"*/{CHECKPOINT_DIR}/*.pt")]
    if not candidates:
        raise NMTError(f"no trained run found under {root}/; train one with `nmt train --config configs/demo.yaml`")
    return max(candidates, key=lambda p: max(c.stat().st_mtime for c in (p / CHECKPOINT_DIR).glob("*.pt")))


def load_translator(run_dir: Path | None = None, checkpoint: Path | None = None, device: str = "auto",
                    length_penalty: float | None = None):
    """The model of a run (its best checkpoint, else its last) with the run's own tokenizer and normalization."""
    if checkpoint is not None:
        checkpoint = Path(checkpoint)
        run_dir = Path(run_dir) if run_dir else checkpoint.parent.parent
    else:
        run_dir = Path(run_dir) if run_dir else latest_run()
        checkpoint = checkpoint_path(run_dir, "best")
        if not checkpoint.is_file():
            checkpoint = checkpoint_path(run_dir, "last")
        if not checkpoint.is_file():
            raise NMTError(f"no checkpoint in {run_dir}; train one with `nmt train --config configs/demo.yaml`")
    cfg = read_run_config(run_dir)
    torch_device = pick_device(device)
    tokenizers = Tokenizers.from_dir(run_dir)
    model = build_model(cfg.model, tokenizers.source.get_piece_size(), tokenizers.target.get_piece_size(),
                        tokenizers.joint)
    state = load_checkpoint(checkpoint, map_location="cpu")
    try:
        model.load_state_dict(state["model"])
    except (KeyError, RuntimeError) as err:
        raise NMTError(f"{checkpoint} does not match the model in {run_dir}/{CONFIG_FILE}: "
                       f"{str(err).splitlines()[0]}") from None
    model.to(torch_device).eval()
    if length_penalty is not None:
        cfg.decode.length_penalty = length_penalty
    translator = Translator(model, tokenizers, read_normalizer(run_dir), cfg.decode, torch_device,
                            autocast_dtype("auto", torch_device))
    return translator, cfg, run_dir, checkpoint
