"""Small builders shared by tests (tiny models and sources)."""

import contextlib
import functools
import http.server
import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import torch
import yaml

from cli_process import run_cli
from nmt.config import ModelConfig
from nmt.data.tokenizer import EOS_ID, PAD_ID
from nmt.models import build_model

VOCAB = 40


def make_model(arch: str, dropout: float = 0.0, joint: bool = True, **overrides):
    """A tiny model (d=32, 2 layers) with fixed initial weights."""
    torch.manual_seed(0)
    cfg = ModelConfig(arch=arch, embed_dim=32, hidden_size=32, num_layers=2, num_heads=4, ff_dim=64, dropout=dropout,
                      **overrides)
    return build_model(cfg, VOCAB, VOCAB, joint)


def random_sources(lengths=(3, 7, 5, 1), seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    out = torch.full((len(lengths), max(lengths) + 1), PAD_ID)
    for i, n in enumerate(lengths):
        out[i, :n] = torch.randint(4, VOCAB, (n,), generator=g)
        out[i, n] = EOS_ID
    return out


# A tiny Transformer run on the real corpus: seconds per training on 2 cores.
TINY = {
    "model": {"arch": "transformer", "embed_dim": 32, "num_layers": 1, "num_heads": 2, "ff_dim": 64, "dropout": 0.1},
    "train": {"max_steps": 24, "max_tokens": 600, "lr": 3e-3, "warmup_steps": 5, "eval_every": 8,
              "eval_max_sentences": 16, "save_every": 2, "log_every": 1, "threads": 1, "device": "cpu"},
    "decode": {"beam_size": 2, "max_len_b": 5},
}


def write_config(directory: Path, name="tiny", base: dict | None = None, **sections) -> Path:
    """TINY (or `base`) with `sections` merged in, written as directory/<name>.yaml."""
    raw = json.loads(json.dumps(base or TINY))
    for section, values in sections.items():
        if isinstance(values, dict):
            raw.setdefault(section, {}).update(values)
        else:
            raw[section] = values
    path = Path(directory) / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def default_stop_signals() -> None:
    """A child's preexec_fn: Ctrl-C, SIGTERM and SIGHUP at their defaults, as in a terminal's foreground command.
    An ignored signal is inherited, and nmt leaves it ignored (as Python does SIGINT): a suite started as a
    non-interactive shell's background job (SIGINT ignored, POSIX) or under nohup (SIGHUP) would otherwise wait out
    a child that a test stops with that signal."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


@contextlib.contextmanager
def stop_signals_at_defaults():
    """default_stop_signals in this process, for a training run in it (Ctrl-C as Python's KeyboardInterrupt);
    the dispositions it found restored afterwards."""
    defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL,
                signal.SIGHUP: signal.SIG_DFL}
    found = {signum: signal.signal(signum, handler) for signum, handler in defaults.items()}
    try:
        yield
    finally:
        for signum, handler in found.items():
            signal.signal(signum, handler)


def nmt(*args, data_dir=None, cwd=None, input=None, text=True, timeout=None, **popen) -> subprocess.CompletedProcess:
    """The CLI in a process of its own, as a user runs it (`python -m nmt ARGS`; tests/cli_process.py)."""
    env = dict(os.environ)
    if data_dir is not None:
        env["NMT_DATA_DIR"] = str(data_dir)
    return run_cli([str(arg) for arg in args], env, cwd=cwd, input=input, text=text, timeout=timeout, **popen)


_NUMBERS = [("one", "un"), ("two", "deux"), ("three", "trois"), ("four", "quatre"), ("five", "cinq"),
            ("six", "six"), ("seven", "sept"), ("eight", "huit"), ("nine", "neuf"), ("ten", "dix")]
_THINGS = [("apples", "pommes"), ("cats", "chats"), ("books", "livres"), ("cars", "voitures"), ("dogs", "chiens"),
           ("keys", "clés"), ("pens", "stylos"), ("birds", "oiseaux")]
_SUBJECTS = [("I have", "J'ai"), ("We have", "Nous avons"), ("They have", "Ils ont"), ("You have", "Vous avez"),
             ("She has", "Elle a")]


def toy_parallel_corpus() -> str:
    """400 English<TAB>French pairs with a regular grammar: enough for three splits and a model that learns it."""
    lines = [f"{s_en} {n_en} {t_en}.\t{s_fr} {n_fr} {t_fr}.\n"
             for s_en, s_fr in _SUBJECTS for n_en, n_fr in _NUMBERS for t_en, t_fr in _THINGS]
    return "".join(lines)


TOY_DATA = {"vocab_size": 300, "valid_fraction": 0.1, "test_fraction": 0.1, "corpus_sha256": "",
            "verify_checksum": False}
# A tiny Transformer on the toy corpus (fast suite: no real corpus needed).
TOY_RUN = {
    "data": TOY_DATA,
    "model": {"arch": "transformer", "embed_dim": 32, "num_layers": 1, "num_heads": 2, "ff_dim": 64, "dropout": 0.0},
    "train": {"max_steps": 40, "max_tokens": 400, "lr": 5e-3, "warmup_steps": 5, "eval_every": 20,
              "save_every": 10, "log_every": 5, "threads": 1, "device": "cpu"},
    "decode": {"beam_size": 2, "max_len_b": 5},
}


def text_of_pieces(engine, count: int) -> str:
    """Target-language text that `engine` (either kind) encodes as exactly `count` pieces: one piece repeated that
    SentencePiece reads back one for one (a byte piece, in a small vocabulary)."""
    target = engine.tokenizers.target
    for piece in range(4, target.get_piece_size()):
        text = target.decode([piece] * count)
        if len(target.encode(engine.normalizer.target(text))) == count:
            return text
    raise AssertionError(f"no piece of this vocabulary repeats {count} times one for one")


@contextlib.contextmanager
def serving(handler):
    """An HTTP server on a free loopback port for the duration of the block; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def serving_folder(folder: Path):
    """`serving` the files of `folder`, quietly."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None
    return serving(handler)
