"""Shared fixtures: tiny corpora made here, and the real corpus from ../shared/data when it is present."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pytest

from tests_helpers import TOY_DATA, toy_parallel_corpus

REPO = Path(__file__).resolve().parents[1]


def real_corpus_zip() -> Path | None:
    candidates = [os.environ.get("NMT_TEST_CORPUS"), REPO.parent / "shared" / "data" / "fra-eng.zip",
                  REPO / "shared" / "data" / "fra-eng.zip"]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


@pytest.fixture(scope="session")
def corpus_zip() -> Path:
    path = real_corpus_zip()
    if path is None:
        pytest.skip("real corpus ../shared/data/fra-eng.zip not present (set NMT_TEST_CORPUS to its path)")
    return path


def make_zip(members: dict[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, content in members.items():
            zf.writestr(name, content)
    return buffer.getvalue()


TOY_PAIRS = [
    ("Go.", "Va !"), ("Hi.", "Salut !"), ("Run!", "Cours\u202f!"), ("I'm home.", "Je suis chez moi."),
    ("I lost.", "J'ai perdu."), ("He's calm.", "Il est calme."), ("Thanks.", "Merci."),
]


def toy_corpus_text(columns: int = 2) -> str:
    extra = "\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 (a) & #2 (b)" if columns == 3 else ""
    return "".join(f"{en}\t{fr}{extra}\n" for en, fr in TOY_PAIRS)


@pytest.fixture(scope="session")
def real_data_dir(corpus_zip, tmp_path_factory) -> Path:
    """The real corpus downloaded (from the local copy) into a session-wide data directory."""
    from nmt.config import DataConfig
    from nmt.data.download import download_corpus

    data_dir = tmp_path_factory.mktemp("real-data")
    download_corpus(str(corpus_zip), data_dir, DataConfig().corpus_sha256, progress=False)
    return data_dir


@pytest.fixture(scope="session")
def prepared(real_data_dir) -> Path:
    from nmt.config import DataConfig
    from nmt.data.prepare import prepare

    return prepare(DataConfig(), real_data_dir, log=lambda *_: None)


@pytest.fixture(scope="session")
def toy_zip(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("toy-corpus") / "toy.zip"
    path.write_bytes(make_zip({"fra-eng/fra.txt": toy_parallel_corpus()}))
    return path


@pytest.fixture(scope="session")
def toy_data_dir(toy_zip, tmp_path_factory) -> Path:
    """The toy corpus downloaded and prepared (vocabulary 300) in a session-wide data directory."""
    from nmt.config import DataConfig
    from nmt.data.download import download_corpus
    from nmt.data.prepare import prepare

    data_dir = tmp_path_factory.mktemp("toy-data")
    download_corpus(str(toy_zip), data_dir, None, progress=False)
    prepare(DataConfig(**TOY_DATA), data_dir, log=lambda *_: None)
    return data_dir


@pytest.fixture(scope="session")
def toy_transformer_run(toy_data_dir, tmp_path_factory) -> Path:
    """A 2-layer Transformer trained for 150 updates on the toy corpus (seconds): it already translates it."""
    from nmt.config import load_config
    from nmt.train import train
    from tests_helpers import TOY_RUN, write_config

    tmp = tmp_path_factory.mktemp("toy-transformer")
    cfg = load_config(write_config(tmp, base=TOY_RUN, model={"num_layers": 2},
                                   train={"max_steps": 150, "eval_every": 150, "save_every": 150}))
    train(cfg, tmp / "run", toy_data_dir, log=lambda *_: None)
    return tmp / "run"
