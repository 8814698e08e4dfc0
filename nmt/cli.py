"""The `nmt` command line: thin wrappers that parse options, call the library, and print results."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

from nmt.errors import NMTError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Neural machine translation English→French: download, prepare, train, translate, evaluate.")

DataDir = typer.Option(Path("data"), "--data-dir", envvar="NMT_DATA_DIR", help="Where corpus and prepared data live.")
ConfigPath = typer.Option(None, "--config", "-c", help="YAML config, e.g. configs/transformer.yaml.")
Overrides = typer.Option(None, "--set", help="Override a config value, e.g. --set train.lr=3e-4 (repeatable).")
Url = typer.Option(None, "--url", envvar="NMT_CORPUS_URL",
                   help="Corpus zip: http(s)://, file:// or a local path (default: the d2l.ai copy).")


def _log(message: str) -> None:
    typer.echo(message, err=True)


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors.")) -> None:
    """Run `nmt COMMAND --help` for each command's options and an example."""


@app.command()
def download(url: Optional[str] = Url, data_dir: Path = DataDir,
             force: bool = typer.Option(False, "--force", help="Download again even if a valid copy exists."),
             no_verify: bool = typer.Option(False, "--no-verify",
                                            help="Accept a corpus whose sha256 differs (another release).")) -> None:
    """Download, verify and extract the Tatoeba English–French corpus.

    Example: nmt download --url ../shared/data/fra-eng.zip
    """
    from nmt.config import D2L_CORPUS_URL, FRA_TXT_SHA256
    from nmt.data.download import download_corpus

    path = download_corpus(url or D2L_CORPUS_URL, data_dir, None if no_verify else FRA_TXT_SHA256, force=force)
    typer.echo(f"corpus ready: {path}")


@app.command()
def prepare(config: Optional[Path] = ConfigPath, data_dir: Path = DataDir, overrides: Optional[List[str]] = Overrides,
            force: bool = typer.Option(False, "--force", help="Prepare again even if the manifest is up to date."),
            url: Optional[str] = Url) -> None:
    """Normalize, split (leakage-free), train SentencePiece and encode the corpus.

    Example: nmt prepare --config configs/transformer.yaml
    """
    from nmt.config import load_config
    from nmt.data.prepare import ensure_prepared, prepare as run_prepare, split_sizes_report

    cfg = load_config(config, overrides).data
    started = time.perf_counter()
    directory = run_prepare(cfg, data_dir, force=True, log=_log) if force else ensure_prepared(cfg, data_dir, url, _log)
    typer.echo(f"prepared data: {directory} ({time.perf_counter() - started:.1f}s; {split_sizes_report(directory)})")


@app.command()
def train(config: Path = typer.Option(..., "--config", "-c", help="YAML config, e.g. configs/transformer.yaml."),
          run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="Default: runs/<config name>/."),
          overrides: Optional[List[str]] = Overrides, data_dir: Path = DataDir, url: Optional[str] = Url) -> None:
    """Train a model (downloading and preparing the data first if needed); re-running resumes from `last`.

    Example: nmt train --config configs/transformer.yaml --set train.max_steps=20000
    Several GPUs: torchrun --nproc_per_node=4 -m nmt train --config configs/transformer.yaml
    """
    from nmt.config import load_config
    from nmt.train import train as run_training

    cfg = load_config(config, overrides)
    progress = run_training(cfg, run_dir or Path("runs") / cfg.name, data_dir, url, log=_log)
    _log(f"done at step {progress.step}, best dev BLEU {progress.best_bleu:.2f}")


def main() -> None:
    debug = "--debug" in sys.argv or bool(os.environ.get("NMT_DEBUG"))
    try:
        app()
    except NMTError as err:
        if debug:
            raise
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as err:  # noqa: BLE001 - the CLI boundary: no traceback for users unless --debug
        if debug:
            raise
        print(f"error: internal error {type(err).__name__}: {err} (re-run with --debug for the traceback)",
              file=sys.stderr)
        sys.exit(1)
