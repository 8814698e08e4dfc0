"""The `nmt` command line: thin wrappers that parse options, call the library, and print results."""

from __future__ import annotations

import math
import os
import signal
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, List, Optional

import typer

from nmt.atomic import unwritable_reason
from nmt.cli_boundary import (TYPER_INTERRUPTED, debug_asked, drop_settings_meaning_unset, environment_refused,
                              interrupt_on_sigterm, is_usage_error, os_error_place, out_of_memory, path_option_problem,
                              PipeWatch, ReaderGone, standard_streams_present, StderrWatch, usage_message,
                              without_debug, write_utf8)
from nmt.errors import NMTError, counted, warn
from nmt.translate_input import (argument_text, stdin_lines, warn_of_the_other_language,
                                 warn_of_whole_files)

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Neural machine translation (any pair; Tatoeba English→French built in): download, prepare, "
                       "train, translate, evaluate, and the commands below.")

CheckpointOption = typer.Option(None, "--checkpoint", help="A checkpoint file, or one of the run's by name: best, "
                                "last, averaged, step-0001000 (default: averaged, else best, else last).")
# --run-dir too: the name `nmt train` gives the same folder, so a run is named one way everywhere.
RunOption = typer.Option(None, "--run", "--run-dir", help="Run directory (default: the newest run).")
DataDir = typer.Option(Path("data"), "--data-dir", envvar="NMT_DATA_DIR", help="Where corpus and prepared data live.")
ConfigHelp = "YAML config, e.g. configs/transformer.yaml, or a shipped one by name (transformer, demo, ...)."
ConfigPath = typer.Option(None, "--config", "-c", help=ConfigHelp)
Overrides = typer.Option(None, "--set", metavar="<key=value>",
                         help="Override a config value, e.g. --set train.lr=3e-4 (repeatable).")


def float_between(low: float, high: float) -> Callable[[str], float]:
    """A float option's parser for [low, high]. Typer's own range check calls NaN "above the maximum" (every
    comparison with NaN is false) and inf merely out of range; these say what the value is."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise typer.BadParameter(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise typer.BadParameter(f"must be a finite number, got {text!r}")
        if not low <= value <= high:
            raise typer.BadParameter(f"must be between {low:g} and {high:g}, got {text}")
        return value
    return parse


def float_option(flag: str, low: float, high: float, help: str):
    """An optional float option in [low, high], its range shown in the help as typer shows its own."""
    return typer.Option(None, flag, parser=float_between(low, high), metavar=f"<float range> [{low:g}<=x<={high:g}]",
                        help=help)


LengthPenalty = float_option("--length-penalty", 0.0, 10.0,
                             help="Length normalization alpha of beam search (the run's decode.length_normalization "
                                  "rule: |Y|^alpha by default); default: the run's config.")
NoRepeat = typer.Option(None, "--no-repeat-ngram", min=0, max=64,
                        help="Never repeat an n-gram of pieces in an output (0: off); default: the run's config.")
Beam = typer.Option(None, "--beam", min=1, max=256, help="Beam size (default: the run's config; 1 = greedy).")
Device = typer.Option("auto", "--device", help="auto, cpu or cuda.")
Engine = typer.Option(None, "--engine", help="nmt (the run's checkpoint) or ctranslate2 (an `nmt export` "
                      "directory given with --model); default: ctranslate2 with --model, else nmt.")
ModelDir = typer.Option(None, "--model", help="CTranslate2 export directory (`nmt export`; the ctranslate2 engine).")
EnsembleMembers = typer.Option(None, "--ensemble", metavar="<path>",
                               help="Another run directory or checkpoint that decodes with "
                               "--run (repeatable): the models' probabilities are averaged at every step. They "
                               "must share the tokenizer (runs trained on the same prepared data).")
DecodeSets = typer.Option(None, "--set", metavar="<key=value>",
                          help="A decode setting for this command only, e.g. --set "
                          "decode.batch_size=50 or decode.max_len_b=20 (repeatable; the run is unchanged).")
Url = typer.Option(None, "--url", envvar="NMT_CORPUS_URL",
                   help="Corpus zip: http(s)://, file:// or a local path (default: the d2l.ai copy).")


def _log(message: str) -> None:
    typer.echo(message, err=True)


def _picture_path(path: Path) -> Path:
    """A PNG path that can be written, checked before any decoding: no suffix means .png."""
    path = Path(path)
    if path.is_dir():
        raise NMTError(f"{path} is a directory; give a file name such as {path / 'picture.png'}")
    if path.exists() and not path.is_file():  # the picture replaces its file by a rename: never a device's
        raise NMTError(f"{path} is not a regular file (a device or a pipe); give a file name such as picture.png")
    if path.suffix == "":
        path = path.with_suffix(".png")
    if path.suffix.lower() not in (".png", ".pdf", ".svg", ".jpg", ".jpeg"):
        raise NMTError(f"{path}: picture format {path.suffix} is not supported (use .png, .pdf, .svg or .jpg)")
    if path.is_dir():
        raise NMTError(f"{path} is a directory; give a file name such as {path / 'picture.png'}")
    parent = path.parent if str(path.parent) else Path(".")
    if parent.exists() and (not parent.is_dir() or not os.access(parent, os.W_OK)):
        raise NMTError(f"cannot write {path}: {parent} is not a writable directory")
    return path


def _print_version(asked: bool) -> None:
    if asked:  # torch's version from its metadata: importing torch would take seconds
        import platform
        from importlib.metadata import PackageNotFoundError, version

        from nmt import __version__

        try:
            torch_version = version("torch")
        except PackageNotFoundError:
            torch_version = "not installed"
        typer.echo(f"nmt {__version__} (torch {torch_version}, Python {platform.python_version()})")
        raise typer.Exit()


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors (also after the "
                                                             "command: nmt train ... --debug)."),
          version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="Print the versions of nmt, torch and Python, and exit.")) -> None:
    """Run `nmt COMMAND --help` for each command's options and an example."""


@app.command()
def download(url: Optional[str] = Url, data_dir: Path = DataDir,
             force: bool = typer.Option(False, "--force", help="Download again even if a valid copy exists."),
             no_verify: bool = typer.Option(False, "--no-verify",
                                            help="Accept a corpus whose sha256 differs (another release).")) -> None:
    """Download, verify and extract the built-in corpus (Tatoeba English–French); your own data needs no download.

    Example: nmt download --url ../shared/data/fra-eng.zip
    """
    from nmt.config import D2L_CORPUS_URL, FRA_TXT_SHA256
    from nmt.data.download import download_corpus

    path = download_corpus(url or D2L_CORPUS_URL, data_dir, None if no_verify else FRA_TXT_SHA256, force=force)
    typer.echo(f"corpus ready: {path}")


@app.command()
def prepare(ctx: typer.Context, config: Optional[Path] = ConfigPath, data_dir: Path = DataDir,
            overrides: Optional[List[str]] = Overrides,
            force: bool = typer.Option(False, "--force", help="Prepare again even if the manifest is up to date."),
            url: Optional[str] = Url) -> None:
    """Normalize, split (leakage-free), train SentencePiece and encode the corpus.

    Example: nmt prepare --config configs/transformer.yaml
    """
    from nmt.config import load_config
    from nmt.data.prepare import ensure_prepared, split_sizes_report
    from nmt.finetune import with_borrowed_tokenizer

    # The data a new run of this config trains on: a fine-tuned one's on its parent's tokenizer.
    cfg = with_borrowed_tokenizer(load_config(config, overrides), log=_log).data
    _check_url_applies(ctx, cfg)
    started = time.perf_counter()
    directory = ensure_prepared(cfg, data_dir, url, _log, force=force)
    typer.echo(f"prepared data: {directory} ({time.perf_counter() - started:.1f}s; {split_sizes_report(directory)})")


def _check_url_applies(ctx: typer.Context, data) -> None:
    """--url on the command line is where the built-in corpus downloads from: with text of one's own it would be
    dropped without a word. (NMT_CORPUS_URL, set once for every run, may stand.)"""
    from nmt.data.sources import builtin_corpus

    # By name: typer carries a click of its own, whose ParameterSource is not click.core's.
    source = ctx.get_parameter_source("url")
    if source is not None and source.name == "COMMANDLINE" and builtin_corpus(data) is None:
        raise NMTError("--url is where the built-in corpus downloads from; this config trains on text of its own "
                       f"({data.source_file or data.corpus}): drop --url, or set data.corpus to a URL")


@app.command()
def train(ctx: typer.Context,
          config: Path = typer.Option(..., "--config", "-c", help=ConfigHelp),
          run_dir: Optional[Path] = typer.Option(None, "--run-dir", "--run",
                                                 help="Default: runs/<config name>/."),
          overrides: Optional[List[str]] = Overrides, data_dir: Path = DataDir, url: Optional[str] = Url) -> None:
    """Train a model (downloading and preparing the data first if needed); re-running resumes from `last`.

    Example: nmt train --config configs/transformer.yaml --set train.max_steps=20000
    Several GPUs: torchrun --nproc_per_node=4 -m nmt train --config configs/transformer.yaml
    """
    from nmt.config import load_config

    cfg = load_config(config, overrides)  # a bad config is refused before torch is imported (~2 s)
    _check_url_applies(ctx, cfg.data)
    from nmt.train import train as run_training

    run_training(cfg, run_dir, data_dir, url, log=_log)  # its last line: "done at step N, best dev BLEU B"


@app.command()
def translate(sentences: Optional[List[str]] = typer.Argument(None, help="Sentences; none (or -): read stdin line "
                                                                         "by line."),
              run: Optional[Path] = RunOption,
              checkpoint: Optional[Path] = CheckpointOption,
              beam: Optional[int] = Beam,
              attention: Optional[Path] = typer.Option(None, "--attention", help="Save the attention heatmap (PNG) "
                                                       "of the first sentence here."),
              show_attention: bool = typer.Option(False, "--show-attention",
                                                  help="Print the most attended source piece for each output piece."),
              attention_layer: Optional[int] = typer.Option(None, "--attention-layer",
                                                            help="Transformer: cross-attention layer to show (-1, "
                                                                 "the default: the last)."),
              attention_head: Optional[int] = typer.Option(None, "--attention-head", min=0,
                                                           help="Transformer: one head (default: mean over heads)."),
              length_penalty: Optional[float] = LengthPenalty, device: str = Device, engine: Optional[str] = Engine,
              model: Optional[Path] = ModelDir, no_repeat_ngram: Optional[int] = NoRepeat,
              ensemble: Optional[List[Path]] = EnsembleMembers,
              sets: Optional[List[str]] = DecodeSets,
              prefix: Optional[str] = typer.Option(None, "--prefix", help="Start every translation with this text "
                                                   "(target language) and let the model continue it."),
              constraint: Optional[List[str]] = typer.Option(None, "--constraint", metavar="<str>",
                                                             help="A phrase (target language) every translation must "
                                                                  "hold; repeatable (given twice: held twice), met in "
                                                                  "any order (beam search)."),
              tab_constraints: bool = typer.Option(False, "--tab-constraints",
                                                   help="Each input is source<TAB>phrase<TAB>...: that sentence's "
                                                        "constraints (fairseq-interactive's --constraints)."),
              n_best: Optional[int] = typer.Option(None, "--n-best", min=1, max=256,
                                                   help="Print the N best hypotheses of each sentence with their "
                                                        "scores, in the Moses n-best format (needs --beam N or "
                                                        "more; with sampling, N draws)."),
              sample_topk: Optional[int] = typer.Option(None, "--sample-topk", min=0, max=1_000_000,
                                                        help="Sample instead of search (back-translation): each piece "
                                                             "among the K most probable (0: all; 1: no sampling)."),
              sample_topp: Optional[float] = float_option("--sample-topp", 0.0, 1.0,
                                                          "Sample from the smallest set of pieces whose "
                                                          "probability reaches P (implies sampling)."),
              temperature: Optional[float] = float_option("--temperature", 0.0, 100.0,
                                                          "Divide the logits by T before sampling (implies "
                                                          "sampling)."),
              seed: Optional[int] = typer.Option(None, "--seed", min=0,
                                                 help="Seed of the sampler (default: the run's decode.sampling_seed, "
                                                      "0).")) -> None:
    """Translate source-language sentences with a trained run (or its CTranslate2 export).

    Example: nmt translate "i'm home ."   or   cat source.txt | nmt translate --beam 5 > target.txt
    """
    if attention is not None:  # argument checks first: importing the engines (torch) takes ~2 s
        attention = _picture_path(attention)
    if sentences == ["-"]:  # the Unix name for stdin (`... | nmt translate -`), not a sentence to translate
        sentences = None
    if (attention_layer is not None or attention_head is not None) and attention is None and not show_attention:
        raise NMTError("--attention-layer and --attention-head choose what --attention PNG or --show-attention "
                       "shows: add one of them")
    if n_best is not None and show_attention:
        raise NMTError("--show-attention adds lines of its own, which an n-best list cannot hold: use one or the "
                       "other (--attention PNG works with --n-best)")
    overrides = _translate_overrides(sets, beam, length_penalty, no_repeat_ngram, sample_topk, sample_topp,
                                     temperature, seed, n_best)
    engine = _check_run_first(engine, run, checkpoint, model)
    from nmt.config import check_n_best
    from nmt.engines import open_engine, translate_stream, with_constraints
    from nmt.models.base import AttentionChoice

    translator = open_engine(engine, run, checkpoint, model, device, overrides, warn=warn, ensemble=ensemble or [])
    check_n_best(n_best or 1, translator.decode)
    if seed is not None and not translator.decode.samples:
        raise NMTError("--seed seeds the sampler: add --sample-topk K (or --sample-topp P)")
    choice = AttentionChoice(-1 if attention_layer is None else attention_layer, attention_head)
    if translator.has_attention:
        translator.check_attention_choice(choice)

    want_attention = (attention is not None or show_attention) and translator.has_attention
    if (attention is not None or show_attention) and not translator.has_attention:
        warn("no attention to show: " + ("the CTranslate2 engine returns none (the nmt engine, --run, does)"
                                         if translator.name == "ctranslate2" else "a seq2seq model has none"))
    given_prefix = argument_text(prefix) if prefix else None
    phrases = [argument_text(c) for c in constraint or []]
    languages = (translator.source_lang, translator.target_lang)
    if sentences:
        texts = list(warn_of_the_other_language([argument_text(s) for s in sentences], languages))
        texts, held = with_constraints(texts, phrases, tab_constraints)
        results: Iterable = translator.translate(texts, attention=choice if want_attention else None,
                                                 n_best=n_best or 1,
                                                 prefixes=[given_prefix] * len(texts) if given_prefix else None,
                                                 constraints=held)
    else:
        # At a terminal, answer each line as it is typed; from a pipe, translate in batches.
        lines = warn_of_the_other_language(warn_of_whole_files(stdin_lines(), tab_constraints), languages)
        results = translate_stream(translator, lines,
                                   chunk_size=1 if sys.stdin.isatty() else None,
                                   n_best=n_best or 1, prefix=given_prefix,
                                   attention=choice if want_attention else None, constraints=phrases,
                                   tab_constraints=tab_constraints)
    _echo_translations(results, n_best is not None, show_attention, attention if want_attention else None)
    translator.truncations.summarize()


def _translate_overrides(sets: Optional[List[str]], beam: Optional[int], length_penalty: Optional[float],
                         no_repeat_ngram: Optional[int], sample_topk: Optional[int], sample_topp: Optional[float],
                         temperature: Optional[float], seed: Optional[int], n_best: Optional[int]) -> dict:
    """`nmt translate`'s decode overrides from its options, an n-best list the beam cannot hold refused where the
    command line fixes both the beam and whether to sample (else the run's config has a say, checked once open)."""
    from nmt.config import DecodeConfig, check_n_best, sampling_overrides

    overrides = _decode_settings(sets, {"beam_size": beam, "length_penalty": length_penalty,
                                        "no_repeat_ngram_size": no_repeat_ngram, "sampling_topp": sample_topp,
                                        "sampling_temperature": temperature, "sampling_seed": seed,
                                        **sampling_overrides(sample_topk, sample_topp, temperature, beam)})
    if "sampling_topk" in overrides and "beam_size" in overrides:
        check_n_best(n_best or 1, DecodeConfig(beam_size=overrides["beam_size"],
                                               sampling_topk=overrides["sampling_topk"]))
    return overrides


def _echo_translations(results: Iterable, n_best: bool, show_attention: bool, heatmap: Optional[Path]) -> None:
    """Each translation as it comes (its n-best lines, under --n-best), with its strongest alignments under
    --show-attention; the first sentence's heatmap saved to `heatmap`."""
    from nmt.engines import n_best_lines

    for index, result in enumerate(results):
        typer.echo("\n".join(n_best_lines(index, result)) if n_best else result.text)
        if show_attention and result.attention is not None:
            strongest = result.attention.argmax(-1).tolist()
            typer.echo("  " + "  ".join(f"{t}→{result.source_pieces[s]}"
                                        for t, s in zip(result.target_pieces, strongest)))
        if index == 0 and heatmap is not None:  # the first sentence's, given or read
            _save_heatmap(result, heatmap)


def _decode_settings(sets: Optional[List[str]], named: dict) -> dict:
    """The decode overrides of a command: its named options (--beam, ...; None: not given) and its --set
    decode.KEY=VALUE items, which must not say otherwise than a named option."""
    from nmt.config import decode_overrides

    settings = decode_overrides(sets or [])
    for key, value in named.items():
        if value is not None and key in settings and settings[key] != value:
            raise NMTError(f"--set decode.{key}={settings[key]} and a named option ({value}) disagree: give one")
    return {**settings, **{key: value for key, value in named.items() if value is not None}}


def _check_run_first(engine: Optional[str], run: Optional[Path], checkpoint: Optional[Path],
                     model: Optional[Path]) -> str:
    """The engine to open (unnamed: ctranslate2 for an export given by --model, else nmt), after refusing a missing
    run or checkpoint (the one named, or none trained yet) before the engines import torch (~2 s); the engine finds
    them again to load them. Other mixes of options are the engine's to judge."""
    engine = engine or ("ctranslate2" if model is not None else "nmt")
    if engine == "nmt" and model is None:
        from nmt.run_dir import Run

        Run.of_checkpoint(run, checkpoint).find_checkpoint(checkpoint)
    return engine


def _save_heatmap(result, path: Path) -> None:
    if result.attention is None:
        _log(f"no attention to plot: the first sentence is empty (nothing written to {path})")
        return
    from nmt.plotting import plot_attention

    plot_attention(result.attention.numpy(), result.source_pieces, result.target_pieces, path)
    _log(f"attention heatmap written to {path}")


@app.command()
def export(run: Optional[Path] = RunOption,
           checkpoint: Optional[Path] = CheckpointOption,
           format: str = typer.Option("ctranslate2", "--format", help="Only ctranslate2 for now."),
           quantization: str = typer.Option("float32", "--quantization",
                                             help="float32, float16, bf16 (bfloat16), int8, int8_float32, "
                                                  "int8_float16, int8_bfloat16 or int16."),
           output: Path = typer.Option(..., "--output", "-o", help="Directory to write the exported model to."),
           force: bool = typer.Option(False, "--force", help="Replace an existing output directory.")) -> None:
    """Export a Transformer run to CTranslate2 (with its SentencePiece model and normalizer).

    Example: nmt export --run runs/demo --quantization int8 -o exports/demo-int8
    """
    if format != "ctranslate2":
        raise NMTError(f"unknown export format {format!r}: use ctranslate2")
    _check_run_first("nmt", run, checkpoint, None)
    from nmt.export import export_ctranslate2
    from nmt.translator import Translator

    translator = Translator.from_run(run, checkpoint, "cpu", warn=warn)
    path = export_ctranslate2(translator, output, quantization, force)
    typer.echo(f"exported {translator.checkpoint} ({quantization}) to {path}")


@app.command()
def serve(run: Optional[Path] = RunOption,
          checkpoint: Optional[Path] = CheckpointOption,
          host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (default: this machine only)."),
          port: int = typer.Option(8000, "--port", min=1, max=65535),
          allow_host: Optional[List[str]] = typer.Option(None, "--allow-host", metavar="<str>",
                                                         help="Also accept requests whose "
                                                         "Host header names this host (repeatable); on loopback "
                                                         "only localhost names are accepted otherwise."),
          device: str = Device, engine: Optional[str] = Engine, model: Optional[Path] = ModelDir,
          ensemble: Optional[List[Path]] = EnsembleMembers, sets: Optional[List[str]] = DecodeSets) -> None:
    """Serve a translation API and a page that shows the attention (FastAPI + uvicorn).

    Example: nmt serve --run runs/demo --port 8000   then open http://127.0.0.1:8000/
    """
    engine = _check_run_first(engine, run, checkpoint, model)
    from nmt.engines import open_engine
    from nmt.serve import run_server
    from nmt.serve_hosts import allowed_host_name, check_bind_address, host_address

    allow_host = [allowed_host_name(name) for name in allow_host or []]
    host = host_address(host)
    listener = check_bind_address(host, port)  # a busy port or a bad address: one line, before loading a model
    translator = open_engine(engine, run, checkpoint, model, device, _decode_settings(sets, {}), warn=warn,
                             ensemble=ensemble or [])
    run_server(translator, listener, host, port, allow_host, log=_log)


@app.command()
def score(run: Optional[Path] = RunOption,
          checkpoint: Optional[Path] = CheckpointOption,
          src: Optional[Path] = typer.Option(None, "--src", help="Source sentences, one per line (with --tgt)."),
          tgt: Optional[Path] = typer.Option(None, "--tgt", help="Their translations, line by line (with --src)."),
          length_penalty: Optional[float] = LengthPenalty, device: str = Device, engine: Optional[str] = Engine,
          model: Optional[Path] = ModelDir, ensemble: Optional[List[Path]] = EnsembleMembers,
          sets: Optional[List[str]] = DecodeSets) -> None:
    """Score given translations: the model's log-probability of each target given its source, without search.

    Reads source<TAB>target lines from stdin (or --src F --tgt F) and prints `log_prob<TAB>score` per pair (the
    score: what beam search ranks by, the log-probability over the length penalty); the total and the perplexity
    per target piece go to stderr. Example: paste test.en test.fr | nmt score > scores.txt
    """
    if (src is None) != (tgt is None):  # argument checks first: importing the engines (torch) takes ~2 s
        raise NMTError("--src and --tgt go together (or give source<TAB>target lines on stdin)")
    _check_one_stdin(src, tgt)
    if src is not None:
        from nmt.evaluate import check_readable

        for path in (src, tgt):  # read once the run's languages are known (a WMT XML's sides)
            check_readable(path)
    engine = _check_run_first(engine, run, checkpoint, model)
    from nmt.engines import open_engine
    from nmt.scoring import Totals, pairs_of_lines, score_line, score_stream

    # No search here: the patient stop is moot (and CTranslate2 would warn that it has none).
    settings = {**_decode_settings(sets, {"length_penalty": length_penalty}), "patient_stop": False}
    scorer = open_engine(engine, run, checkpoint, model, device, settings, warn=warn, ensemble=ensemble or [])
    if src is None:
        pairs = pairs_of_lines(stdin_lines())
    else:
        from nmt.evaluate import read_lines, refuse_swapped

        languages = scorer.source_lang, scorer.target_lang
        sources, targets = read_lines(src, *languages), read_lines(tgt, *languages[::-1])
        if len(sources) != len(targets):
            raise NMTError(f"{src} has {counted(len(sources), 'line')} but {tgt} has {counted(len(targets), 'line')}: "
                           "score takes pairs")
        refuse_swapped(sources, targets, languages, ("--src", "--tgt"))
        pairs = zip(sources, targets)
    totals = Totals()
    for scored in score_stream(scorer, pairs):
        totals.add(scored)
        typer.echo(score_line(scored))
    scorer.truncations.summarize()
    _log(totals.describe())


@app.command()
def evaluate(run: Optional[Path] = RunOption,
             checkpoint: Optional[Path] = CheckpointOption,
             split: Optional[str] = typer.Option(None, "--split", help="test or valid (of the run's prepared data; "
                                                 "default: test)."),
             src: Optional[Path] = typer.Option(None, "--src", help="Source file instead of a split."),
             ref: Optional[List[Path]] = typer.Option(None, "--ref", metavar="<path>",
                                                      help="Reference file(s) for --src (repeatable)."),
             beam: Optional[int] = Beam,
             compare: Optional[List[Path]] = typer.Option(None, "--compare", metavar="<path>",
                                                          help="Compare runs (repeatable): one "
                                                          "table with paired bootstrap against the first (--run, "
                                                          "when given)."),
             length_penalty: Optional[float] = LengthPenalty, device: str = Device, engine: Optional[str] = Engine,
             model: Optional[Path] = ModelDir, data_dir: Path = DataDir, no_repeat_ngram: Optional[int] = NoRepeat,
             ensemble: Optional[List[Path]] = EnsembleMembers, sets: Optional[List[str]] = DecodeSets,
             out_dir: Optional[Path] = typer.Option(None, "--out-dir", help="Where the hypotheses and the report go "
                                                    "(default: RUN/eval, or MODEL/eval with --engine ctranslate2)."),
             constraints: Optional[Path] = typer.Option(None, "--constraints",
                                                        help="A line per source: the phrases (target language, "
                                                             "TAB-separated; empty: none) its translation must "
                                                             "hold. The report counts those held.")
             ) -> None:
    """Score a run with sacrebleu (BLEU, chrF; multi-reference) and write hypotheses and a JSON report.

    Example: nmt evaluate --run runs/transformer --beam 5   or   nmt evaluate --compare runs/a --compare runs/b
    """
    if ref and src is None:  # argument checks first: importing the engines (torch) takes ~2 s
        raise NMTError("--ref needs --src (the source sentences the references translate)")
    _check_one_stdin(src, *(ref or []), constraints)
    if constraints is not None and compare:
        raise NMTError("--constraints holds one test set's phrases for one model: evaluate each run with it "
                       "instead of --compare")
    if split is not None and src is not None:  # else the split was dropped without a word
        raise NMTError(f"--split {split} names a split of the run's data and --src a file of your own: give one")
    split = split or "test"
    if compare:
        compared = _runs_to_compare(run, compare, checkpoint, engine, model, out_dir, ensemble)
    else:
        engine = _check_run_first(engine, run, checkpoint, model)
    from nmt import evaluate as ev
    from nmt.engines import open_engine

    overrides = _decode_settings(sets, {"beam_size": beam, "length_penalty": length_penalty,
                                        "no_repeat_ngram_size": no_repeat_ngram})
    if compare:
        typer.echo(ev.format_comparison(ev.compare_runs(compared, split, src, ref, overrides, device, data_dir)))
        return
    translator = open_engine(engine, run, checkpoint, model, device, overrides, warn=warn, ensemble=ensemble or [])
    if src is None and translator.config is None:
        raise NMTError(f"{model} was exported before exports kept their data settings: score it with --src/--ref")
    run_config = translator.run.config_path if getattr(translator, "run", None) else None  # none for an export
    test_set = ev.load_test_set(translator.config, split, src, ref, data_dir, translator.trained_on, run_config,
                                (translator.source_lang, translator.target_lang))
    if constraints is not None:
        test_set = ev.with_constraints(test_set, constraints)
    out_dir = ev.check_writable(out_dir or translator.eval_dir)  # before decoding: a read-only run fails at once
    _log(f"using {translator.describe().get('checkpoint')} ({translator.name} engine)")
    report = ev.evaluate(translator, test_set, out_dir)
    typer.echo(ev.format_report(report))
    _log(f"hypotheses and report written to {out_dir}")


def _check_one_stdin(*files: Optional[Path]) -> None:
    """`-` names stdin, which one file option can read, not two (the second would find it spent)."""
    if sum(str(f) == "-" for f in files if f is not None) > 1:
        raise NMTError("- (stdin) is given for more than one file: stdin can be read once; name a file for the others")


def _runs_to_compare(run: Optional[Path], compare: List[Path], checkpoint: Optional[Path], engine: Optional[str],
                     model: Optional[Path], out_dir: Optional[Path], ensemble: Optional[List[Path]]) -> List[Path]:
    """`--run` (the baseline, when given) then every `--compare` run, each checked before torch is imported."""
    given = [name for name, value in (("--checkpoint", checkpoint), ("--model", model), ("--out-dir", out_dir),
                                      ("--ensemble", ensemble or None)) if value is not None] + \
        (["--engine"] if engine not in (None, "nmt") else [])
    if given:
        raise NMTError(f"--compare takes run directories (each scored with the checkpoint it would be alone) and "
                       f"writes no files: {', '.join(given)} does not apply")
    runs = ([run] if run is not None else []) + list(compare)
    if len(runs) < 2:
        raise NMTError("--compare needs two runs or more: --compare A --compare B, or --run A --compare B")
    for each in runs:
        _check_run_first("nmt", each, None, None)
    return runs


@app.command()
def runs(folder: Optional[Path] = typer.Argument(None, show_default=False,
                                                 help="Where the run directories are (as --root)."),
         root: Optional[Path] = typer.Option(None, "--root", show_default=False,
                                             help="Where the run directories are (default: runs).")) -> None:
    """List the runs under a folder: model, language pair, steps, best dev BLEU, and the best evaluations.

    Example: nmt runs   or   nmt runs /data/experiments   or   nmt runs --root /data/experiments
    """
    from nmt.inventory import find_runs, format_runs, summarize
    from nmt.run_dir import DEFAULT_ROOT

    if folder is not None and root is not None and folder != root:
        raise NMTError(f"two folders named: {folder} and --root {root}; name one")
    # `nmt runs experiments/` as `ls` takes a folder: it said "unexpected extra argument".
    typer.echo(format_runs([summarize(run) for run in find_runs(folder or root or DEFAULT_ROOT)]))


@app.command()
def average(run: Optional[Path] = RunOption,
            last: int = typer.Option(5, "--last", min=2, help="How many of the newest step checkpoints."),
            allow_fewer: bool = typer.Option(False, "--allow-fewer",
                                             help="With fewer than 2 step checkpoints, say so and exit 0 (for "
                                                  "scripts); any other failure still exits non-zero.")) -> None:
    """Average the last N saved checkpoints into RUN/checkpoints/averaged.pt (translate/evaluate then use it).

    Example: nmt average --run runs/cpu-base --last 5
    """
    from nmt.average import TooFewCheckpoints, average_checkpoints
    from nmt.run_dir import Run

    try:
        path, inputs = average_checkpoints(Run.open(run), last)
    except TooFewCheckpoints as err:
        if not allow_fewer:
            raise
        typer.echo(f"note: nothing averaged: {err}")
        return
    fewer = f" (the run keeps {len(inputs)} of the {last} asked for)" if len(inputs) < last else ""
    typer.echo(f"averaged {len(inputs)} checkpoints ({inputs[0].name} … {inputs[-1].name}) into {path}{fewer}")


@app.command()
def plot(run: Optional[Path] = RunOption,
         output: Optional[Path] = typer.Option(None, "--output", "-o", help="PNG path (default: RUN/curves.png).")
         ) -> None:
    """Plot learning curves (train/dev loss, dev BLEU against steps) from a run's metrics.jsonl.

    Example: nmt plot --run runs/demo
    """
    from nmt.run_dir import Run

    selected = Run.open(run)  # a missing run and a bad picture path are refused before matplotlib and torch load
    path = _picture_path(output) if output else selected.directory / "curves.png"
    if not output:
        reason = unwritable_reason(selected.directory)
        if reason:  # a run on a read-only disk, say
            raise NMTError(f"cannot write {path}: {reason}; choose another file with -o FILE")
    from nmt.plotting import plot_learning_curves

    plot_learning_curves(selected, path)
    typer.echo(f"learning curves written to {path}")


def main() -> None:
    args, debug = without_debug(sys.argv[1:])
    debug = debug or debug_asked(os.environ)
    if signal.getsignal(signal.SIGTERM) != signal.SIG_IGN:  # one ignored by whoever started nmt stays ignored
        signal.signal(signal.SIGTERM, interrupt_on_sigterm)
    drop_settings_meaning_unset()
    standard_streams_present()
    sys.stdout = PipeWatch(write_utf8(sys.stdout))
    sys.stderr = stderr = StderrWatch(write_utf8(sys.stderr))
    if problem := path_option_problem(app, args):
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    try:
        code = app(args=args, prog_name="nmt", standalone_mode=False)
        if code == TYPER_INTERRUPTED:
            raise KeyboardInterrupt  # said below, as older typers' Abort is
        if stderr.reader_gone:  # training stopped with a checkpoint when it went (StderrWatch)
            sys.exit(128 + signal.SIGPIPE)
        sys.exit(code if isinstance(code, int) else 0)
    except ReaderGone:
        # Quietly, with the status of a process that SIGPIPE stopped (`yes | head` says 141): what was written was
        # read; the rest had no reader. Output still buffered goes nowhere rather than fail again at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.__stdout__.fileno())
        sys.exit(128 + signal.SIGPIPE)
    except NMTError as err:
        if debug:
            raise
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except (KeyboardInterrupt, typer.Abort):
        if stderr.reader_gone:
            sys.exit(128 + signal.SIGPIPE)
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except OSError as err:  # a full or read-only disk, a vanished directory: the environment, not a bug
        if debug:
            raise
        print(f"error: {err.strerror or err}{os_error_place(err)}", file=sys.stderr)
        sys.exit(2)
    except Exception as err:  # noqa: BLE001 - the CLI boundary: no traceback for users unless --debug
        if not debug and (refused := environment_refused(err)):  # the machine's limit, the shell's settings
            print(f"error: {refused}", file=sys.stderr)
            sys.exit(2)
        if not debug and (memory := out_of_memory(err)):  # the machine's limit, as a full disk is: not a bug
            print(f"error: {memory}: lower train.max_tokens or the model's size to train; decode.batch_size or the "
                  "beam to translate", file=sys.stderr)
            sys.exit(2)
        if is_usage_error(err):
            if not err.format_message().strip():  # `nmt` alone: the help was the answer
                sys.exit(0)
            print(f"error: {usage_message(err)}", file=sys.stderr)
            sys.exit(2)
        if debug:
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        print(f"error: internal error {type(err).__name__}: {first} (re-run with --debug for the traceback)",
              file=sys.stderr)
        sys.exit(1)
