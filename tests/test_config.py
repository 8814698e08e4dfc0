import re
import subprocess
import sys

import pytest

from nmt.config import load_config
from nmt.errors import ConfigError


def write(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def test_defaults_and_overrides(tmp_path):
    cfg = load_config(write(tmp_path, "model:\n  arch: luong\ntrain:\n  lr: 3e-4\n"), ["train.max_steps=10"])
    assert cfg.model.arch == "luong" and cfg.train.lr == 3e-4 and cfg.train.max_steps == 10
    assert cfg.name == "c"
    assert load_config(None, ["train.lr=1e-3"]).train.lr == 1e-3


def test_unknown_key_suggests_closest(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown key model\.hiden_size; did you mean model\.hidden_size\?"):
        load_config(write(tmp_path, "model:\n  hiden_size: 3\n"))


@pytest.mark.parametrize("overrides,message", [
    (["lr=1e-3"], "unknown key lr; did you mean train.lr?"),  # a setting outside its section
    (["train.beam_size=5"], "unknown key train.beam_size; did you mean decode.beam_size?"),  # in another one
    (["model.max_steps=5"], "unknown key model.max_steps; did you mean train.max_steps?"),
    (["foo=1"], "unknown key foo; valid keys: name, data, model, train, decode"),
])
def test_a_setting_in_the_wrong_section_is_named_where_it_lives(overrides, message):
    with pytest.raises(ConfigError) as refused:
        load_config(None, overrides)
    assert str(refused.value) == message


@pytest.mark.parametrize("text,message", [
    # JoeyNMT's, fairseq's and OpenNMT-py's names: before, "valid keys: ..." (no close match) or a wrong one.
    ("train:\n  learning_rate: 3.0e-4\n", "unknown key train.learning_rate; did you mean train.lr? (nmt's name"),
    ("train:\n  update_freq: 4\n", "did you mean train.accum_steps?"),
    ("train:\n  batch_size: 4096\n", "did you mean train.max_tokens (nmt batches by tokens)?"),
    ("train:\n  batch_type: sentence\n", "did you mean train.max_tokens (nmt batches by tokens, always)?"),
    ("train:\n  max_sentences: 64\n", "unknown key train.max_sentences; did you mean train.max_tokens (nmt batches"),
    ("decode:\n  max_sentences: 64\n", "did you mean decode.batch_size (sentences a batch, as fairseq-generate's)?"),
    ("model:\n  encoder_layers: 6\n", "did you mean model.num_layers?"),
    ("decode:\n  lenpen: 1.0\n", "did you mean decode.length_penalty?"),
    ("train:\n  beam: 5\n", "unknown key train.beam; did you mean decode.beam_size?"),
    ("data:\n  src_lang: de\n", "did you mean data.source_lang?"),
    ("train:\n  eval_bleu_args: '{\"beam\": 4}'\n", "did you mean train.eval_beam_size (the beam of fairseq's JSON)?"),
    ("train:\n  average_decay: 0.0001\n", "did you mean train.ema_decay (the decay: 1 minus this setting)?"),
    ("train:\n  tensorboard_logdir: tb\n", "did you mean train.tensorboard (true: the run's tensorboard/ folder)?"),
    ("testing:\n  beam_size: 5\n", "unknown key testing; did you mean decode?"),  # JoeyNMT's section
    # Where difflib's nearest name meant something else: schedule, max_input_tokens, source_lang, join_punctuation_*.
    ("decode:\n  max_output_length: 100\n", "did you mean decode.max_len_a and decode.max_len_b (at most a"),
    ("data:\n  src_seq_length: 100\n", "did you mean data.max_words (or data.max_pieces, in subword pieces)?"),
    ("data:\n  joined_dictionary: true\n", "did you mean data.joint_vocab?"),
    ("data:\n  dev: data/dev\n", "did you mean data.valid_source_file and data.valid_target_file?"),
    ("model:\n  decoder_layers: 6\n", "did you mean model.num_layers (the encoder's and the decoder's)?"),
    ("train:\n  shuffle: true\n", "unknown key train.shuffle: nmt has no such setting; training pairs are "
                                  "shuffled every epoch, in an order drawn from train.seed"),
    ("train:\n  model_dir: runs/x\n", "nmt has no such setting; the run directory is given on the command line: "
                                      "nmt train --run-dir DIR"),
])
def test_a_peer_toolkits_name_for_a_setting_is_given_nmts(tmp_path, text, message):
    with pytest.raises(ConfigError) as refused:
        load_config(write(tmp_path, text))
    assert message in str(refused.value)
    assert load_config(None, ["decode.batch_size=8"]).decode.batch_size == 8  # nmt's own name stays its own


@pytest.mark.parametrize("item,message", [
    ("beam_size=3", "--set beam_size=…: a decode setting takes its section: --set decode.beam_size=…"),
    ("decode.lr=1", "--set decode.lr: lr is a train setting, fixed by training; only decode settings apply here"),
    ("train.lr=1", "the train section was fixed by training"),
    ("foo.bar=1", "--set foo…: no such setting; only decode settings apply here"),
    ("decode.beem=1", "unknown key decode.beem; valid keys: beam_size"),
])
def test_decode_overrides_say_what_a_misplaced_setting_is(item, message):
    from nmt.config import decode_overrides

    with pytest.raises(ConfigError) as refused:
        decode_overrides([item])
    assert message in str(refused.value)
    assert decode_overrides(["decode.beam_size=3"]) == {"beam_size": 3}


def test_config_from_a_pipe_and_a_directory_refused(tmp_path):
    """`--config <(...)` hands over a pipe, not a regular file: it is read; a directory is named as one."""
    import os
    import threading

    fifo = tmp_path / "piped"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=("model:\n  arch: luong\n",), daemon=True)
    writer.start()
    try:
        config = load_config(fifo)
    finally:
        writer.join(timeout=10)
    assert config.model.arch == "luong" and config.name == "piped"
    with pytest.raises(ConfigError, match=r"is a directory, not a YAML file"):
        load_config(tmp_path)
    with pytest.raises(ConfigError, match=r"config file not found"):
        load_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize("text,pattern", [
    ("train:\n  max_steps: ten\n", r"train\.max_steps must be int"),
    ("train:\n  lr: -1\n", r"train\.lr must be > 0"),
    ("model:\n  arch: rnn\n", r"model\.arch must be one of"),
    ("model: 3\n", r"model must be a mapping"),
    ("train:\n  compile: 1\n", r"train\.compile must be bool"),
    ("train:\n  max_steps: 1.255e2\n", r"train\.max_steps must be int, got '1\.255e2'"),
    ("train:\n  max_tokens: 1.5\n", r"train\.max_tokens must be int"),
    ("train:\n  max_steps: .inf\n", r"train\.max_steps must be int"),
    ("data:\n  character_coverage: 0.5\n", r"data\.character_coverage must be >= 0\.98; got 0\.5"),
])
def test_bad_values(tmp_path, text, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_config(write(tmp_path, text))


def test_whole_numbers_in_scientific_notation_are_ints(tmp_path):
    # PyYAML reads 1e4 as the string "1e4" and 2.0e3 as a float; both spell the whole number a user means.
    config = load_config(write(tmp_path, "train:\n  max_steps: 1e4\n  max_tokens: 2.0e3\n"), ["train.log_every=5e1"])
    assert (config.train.max_steps, config.train.max_tokens, config.train.log_every) == (10000, 2000, 50)
    assert all(type(v) is int for v in (config.train.max_steps, config.train.max_tokens, config.train.log_every))


@pytest.mark.parametrize("override,pattern", [
    ("train.lr", "expected KEY=VALUE"), ("train.max_tokens=big", "train.max_tokens must be int"),
    ("train.nope=1", "unknown key train.nope"),
])
def test_bad_overrides(override, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_config(None, [override])


@pytest.mark.parametrize("args,message", [
    (["prepare", "--config", "{cfg}", "--data-dir", "{tmp}"], "error: unknown key model.hiden_size; did you mean"),
    (["prepare", "--set", "train.lr=abc", "--data-dir", "{tmp}"], "error: train.lr must be float"),
    (["prepare", "--config", "{tmp}/missing.yaml"], "error: config file not found"),
    (["download", "--url", "{tmp}/none.zip", "--data-dir", "{tmp}"], "error: corpus archive not found"),
])
def test_cli_errors_are_one_line(tmp_path, args, message):
    cfg = write(tmp_path, "model:\n  hiden_size: 3\n")
    args = [a.format(cfg=cfg, tmp=tmp_path) for a in args]
    result = subprocess.run([sys.executable, "-m", "nmt", *args], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.startswith(message), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def _int_settings() -> list[str]:
    import dataclasses

    from nmt.config import SECTIONS

    return [f"{name}.{f.name}" for name, section in SECTIONS.items() for f in dataclasses.fields(section)
            if f.type in (int, "int")]


@pytest.mark.parametrize("key", _int_settings())
def test_no_integer_setting_takes_more_than_64_bits(key):
    """torch's seeds, numpy and islice take 64 bits: past them a setting was an internal error, far from its name."""
    for value, bound in (("9223372036854775808", "<= "), ("1e20", "<= "), ("-9223372036854775809", ">= ")):
        with pytest.raises(ConfigError, match=rf"^{key} must be {bound}"):
            load_config(None, [f"{key}={value}"])


def test_integer_settings_are_found_and_a_settings_own_bound_is_the_one_named():
    assert {"train.seed", "train.threads", "model.local_window", "decode.beam_size"} <= set(_int_settings())
    with pytest.raises(ConfigError, match=r"^train.seed must be <= 9223372036854775807; got 100000000000000000000$"):
        load_config(None, ["train.seed=1e20"])
    with pytest.raises(ConfigError, match=r"^decode.beam_size must be <= 256; got 100000000000000000000$"):
        load_config(None, ["decode.beam_size=1e20"])


def test_every_model_and_data_field_declares_what_it_fixes():
    """A new field cannot escape the resume check or the data fingerprint by being forgotten."""
    import dataclasses

    from nmt.config import DataConfig, ModelConfig

    assert all("shape" in f.metadata for f in dataclasses.fields(ModelConfig))
    assert all("fingerprint" in f.metadata for f in dataclasses.fields(DataConfig))


def test_model_args_hold_exactly_the_shape_fields():
    from nmt.config import ModelConfig, model_args

    args = model_args(ModelConfig())
    assert "embed_dim" in args and "num_heads" in args and "dropout" not in args and "max_positions" not in args


@pytest.mark.parametrize("text,message", [
    ("model:\n  arch: transformer\n  attention: dot\n", "model.attention has no effect on a transformer"),
    ("model:\n  arch: luong\n  num_heads: 8\n", "model.num_heads has no effect on a luong"),
    ("model:\n  arch: bahdanau\n  bf16_residual: true\n", "model.bf16_residual has no effect on a bahdanau"),
    ("model:\n  arch: luong\n  attention_dropout: 0.0\n", "model.attention_dropout has no effect on a luong"),
    ("model:\n  arch: luong\n  attention: general\n  local_window: 3\n", "local_window only applies"),
    ("train:\n  compile_mode: max-autotune-no-cudagraphs\n", "has no effect without train.compile: true"),
    ("train:\n  compile_backend: cudagraphs\n", "compile_backend cudagraphs has no effect without train.compile"),
    ("train:\n  compile_scope: layers\n", "compile_scope layers has no effect without train.compile"),
    ("train:\n  compile: true\n  compile_backend: cudagraphs\n  compile_mode: max-autotune\n  length_multiple: 8\n",
     "inductor's: train.compile_backend cudagraphs ignores it"),
    ("data:\n  corpus: my.tsv\n  source_file: a.de\n  target_file: a.en\n",
     "data.corpus my.tsv is not read: data.source_file + data.target_file name the training text"),
    ("data:\n  source_column: 2\n  target_column: 4\n", "data.source_column picks a column of a data.corpus of your "
     "own; the built-in corpus is read as they come (ignored)"),
    ("data:\n  source_file: a.de\n  target_file: a.en\n  target_column: 3\n", "data.target_column picks a column "
     "of a data.corpus of your own; data.source_file + data.target_file are read as they come (ignored)"),
    ("data:\n  subword_nbest: 8\n", "data.subword_nbest 8 has no effect without data.subword_alpha (ignored)"),
    ("train:\n  max_steps: 60\n", "train.warmup_steps 4000 > train.max_steps 60: training ends with the learning "
     "rate still warming up (at most 1.5% of train.lr 0.0005)"),
    ("train:\n  schedule: constant\n  max_steps: 500\n  warmup_steps: 800\n", "(at most 62.5% of train.lr"),
    ("train:\n  schedule: plateau\n  warmup_steps: 500\n", "train.warmup_steps 500 has no effect with "
     "train.schedule plateau, which starts at train.lr (ignored)"),
])
def test_settings_without_effect_are_named_in_a_warning(tmp_path, text, message):
    warnings = []
    load_config(write(tmp_path, text), warn=warnings.append)
    assert any(message in w for w in warnings), warnings


def test_a_warm_up_as_long_as_training_is_not_warned_of(tmp_path):
    """At warmup_steps == max_steps the lr peaks at the last update: it reaches train.lr, so no warning; the plateau
    schedule has no warm-up, so its default one is not warned of either."""
    for text in ("train:\n  max_steps: 500\n  warmup_steps: 500\n", "train:\n  max_steps: 60\n  schedule: plateau\n"):
        warnings = []
        load_config(write(tmp_path, text), warn=warnings.append)
        assert warnings == [], text


@pytest.mark.parametrize("corpus", ["", "  corpus: ''\n"], ids=["unset", "emptied"])
def test_files_of_ones_own_alone_warn_of_nothing(tmp_path, corpus):
    """data.corpus: "" names no corpus: it was warned of as "data.corpus  is not read"."""
    warnings = []
    load_config(write(tmp_path, f"data:\n{corpus}  source_file: a.de\n  target_file: a.en\n"), warn=warnings.append)
    assert warnings == []


@pytest.mark.parametrize("text,pattern", [
    ("model:\n  embed_dim: 30\n  num_heads: 4\n", "divisible by model.num_heads"),
    ("decode:\n  max_input_tokens: 2000\n", "exceeds model.max_positions 1024"),
    ("decode:\n  sampling_topk: 10\n", "sampling \\(top-k 10\\) draws one continuation at a time: it takes beam 1"),
    ("data:\n  max_pieces: 2000\n", "data.max_pieces \\+ 1 = 2001 exceeds"),
    ("name: ../outside\n", "must be a plain name"),
    ("train:\n  seed: -3\n", "train.seed must be >= 0"),
    ("data:\n  max_length_ratio: 0.5\n", "data.max_length_ratio 0.5 would drop every pair"),
    ("train:\n  peak_tflops: 5.0e-324\n", "train.peak_tflops 5e-324 is below any device's: set 0"),
    ("train:\n  peak_tflops: 1.0e-7\n", "train.peak_tflops 1e-07 is below any device's"),
    ("train:\n  peak_tflops: 2.0e+6\n", "train.peak_tflops must be <= 1000000.0"),
    ("model:\n  activation_dropout: 1.0\n", "model.activation_dropout must be < 1.0"),
    ("train:\n  packed_attention: flex\n", "takes packed rows of a multiple of 128 positions"),
    ("model:\n  attention_dropout: 0\ntrain:\n  packed_attention: flex\n  pack_length: 100\n", "\\(now 100\\)"),
    ("model:\n  dropout: 0.1\ntrain:\n  packed_attention: flex\n  pack_length: 128\n",
     "set model.attention_dropout: 0 \\(now 0.1, model.dropout\\)"),
    ("train:\n  lr: 1\ntrain:\n  lr: 2\n", "duplicate key 'train'"),
    ("train:\n  compile: true\n  compile_mode: reduce-overhead\n", "CUDA graph per batch shape: set train.pack_len"),
    ("train:\n  compile: true\n  compile_backend: cudagraphs\n", "compile_backend cudagraphs records a CUDA graph"),
    ("train:\n  compile_backend: tensorrt\n", "train.compile_backend must be one of"),
    ("model:\n  arch: bahdanau\ntrain:\n  pack_length: 128\n", "only the Transformer"),
    ("train:\n  pack_length: 128\n  length_multiple: 8\n", "two ways to static shapes: set one"),
    ("train:\n  pack_length: 128\n  max_tokens: 100\n", "exceeds train.max_tokens 100"),
    ("train:\n  compile_mode: graphs\n", "train.compile_mode must be one of"),
    ("train:\n  best_metric: ppl\n", "train.best_metric must be one of"),
    ("train:\n  cuda_graph: true\n", "train.cuda_graph captures an update per batch shape: set train.pack_length"),
    ("train:\n  cuda_graph: true\n  pack_length: 128\n  compile: true\n  compile_mode: reduce-overhead\n",
     "train.cuda_graph and train.compile_mode reduce-overhead are two ways to CUDA graphs: set one"),
    ("train:\n  cuda_graph: true\n  pack_length: 128\n  compile: true\n  compile_backend: cudagraphs\n",
     "train.cuda_graph and train.compile_backend cudagraphs are two ways to CUDA graphs: set one"),
    ("train:\n  cuda_graph: true\n  pack_length: 128\n  precision: fp16\n", "takes precision bf16 or fp32"),
    ("model:\n  arch: luong\ntrain:\n  compile: true\n  compile_scope: layers\n", "a luong model compiles whole"),
    ("train:\n  compile: true\n  compile_scope: layers\n  compile_mode: reduce-overhead\n  pack_length: 128\n",
     "compile_scope layers and train.compile_mode reduce-overhead: CUDA graphs of single layers"),
    ("train:\n  compile_scope: regions\n", "train.compile_scope must be one of"),
    ("data:\n  corpus: p.tsv\n  source_column: 2\n", "data.source_column and data.target_column both read column 2"),
    ("data:\n  corpus: p.tsv\n  target_column: 0\n", "data.target_column must be >= 1"),
])
def test_inconsistent_configs_fail_at_load(tmp_path, text, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_config(write(tmp_path, text))


@pytest.mark.parametrize("code", ["EN", "pt_BR", "zh-Hant-TW", "cmn"])
def test_language_codes_in_any_case_and_locale_form_are_taken(tmp_path, code):
    cfg = load_config(write(tmp_path, f"data:\n  corpus: pairs.tsv\n  source_lang: {code}\n  target_lang: fr\n"))
    assert cfg.data.source_lang == code


def test_shipped_configs_load_without_warnings():
    from pathlib import Path

    for path in sorted((Path(__file__).parents[1] / "configs").glob("*.yaml")):
        warnings = []
        load_config(path, warn=warnings.append)
        assert warnings == [], (path.name, warnings)


def test_a_config_named_without_its_folder_or_suffix_is_suggested(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "demo.yaml").write_text("model: {arch: transformer}\n")
    with pytest.raises(ConfigError, match=r"^config file not found: configs/demo \(did you mean configs/demo.yaml\?\)"):
        load_config("configs/demo")
    with pytest.raises(ConfigError, match=r"^--config demo may mean configs/demo.yaml here or the shipped config demo"):
        load_config("demo")  # a copy of the shipped config's folder here: either may be meant
    with pytest.raises(ConfigError, match=r"^config file not found: other \(shipped configs, by name: .*transformer"):
        load_config("other")


def test_a_shipped_config_is_named_by_its_name_anywhere(tmp_path, monkeypatch):
    """Outside a checkout `--config configs/transformer.yaml` found nothing; the shipped configs go by name."""
    from pathlib import Path

    repo_configs = Path(__file__).parents[1] / "configs"
    monkeypatch.chdir(tmp_path)
    for name in ("transformer", "demo", "bahdanau"):
        assert load_config(name) == load_config(repo_configs / f"{name}.yaml")
        assert load_config(name).name == name
    with pytest.raises(ConfigError, match=r"^config file not found: configs/demo.yaml \(the shipped config of that "
                                          r"name: --config demo\)$"):
        load_config("configs/demo.yaml")
    with pytest.raises(ConfigError, match=r"^config file not found: demo.yml"):  # a suffix makes it a file
        load_config("demo.yml")
    monkeypatch.chdir(repo_configs.parent)  # in the checkout configs/demo.yaml is the shipped file itself
    assert load_config("demo") == load_config(repo_configs / "demo.yaml")


def test_a_name_that_is_both_a_file_here_and_a_shipped_config_is_refused_naming_both(tmp_path, monkeypatch):
    """`--config demo` beside a copy `demo.yaml` said "config file not found: demo" while both exist."""
    from pathlib import Path

    shipped = Path(__file__).parents[1] / "configs" / "demo.yaml"
    monkeypatch.chdir(tmp_path)
    Path("demo.yaml").write_text("model: {arch: luong}\n")
    with pytest.raises(ConfigError) as refused:
        load_config("demo")
    assert str(refused.value) == (f"--config demo may mean demo.yaml here or the shipped config demo ({shipped}): "
                                  f"name the file, --config demo.yaml or --config {shipped}")
    assert load_config("demo.yaml").model.arch == "luong"


@pytest.mark.slow
def test_the_wheel_ships_the_configs(tmp_path):
    """A wheel install has no configs/ beside it: the build copies them into the package (pyproject's package-dir)."""
    import json
    import os
    import shutil
    import subprocess
    import sys
    import zipfile
    from pathlib import Path

    setuptools = pytest.importorskip("setuptools")
    if tuple(int(p) for p in setuptools.__version__.split(".")[:2]) < (70, 1):
        pytest.importorskip("wheel", reason="setuptools < 70.1 builds wheels with the wheel package only")
    repo = Path(__file__).parents[1]
    source = tmp_path / "source"  # pip builds in the tree: a copy keeps build/ out of the checkout
    for part in ("nmt", "configs"):
        shutil.copytree(repo / part, source / part, ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(repo / part, source / part)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                            tmp_path / "wheel", source], capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr
    (wheel,) = (tmp_path / "wheel").glob("nmt-*.whl")
    # pyproject lists the packages one by one (package-dir needs it): a new subpackage left out would be missing.
    shipped = set(zipfile.ZipFile(wheel).namelist())
    in_checkout = {path.relative_to(repo).as_posix() for pattern in ("nmt/**/*.py", "nmt/static/*")
                   for path in repo.glob(pattern)}
    assert in_checkout - shipped == set()
    site = tmp_path / "site"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", site, wheel],
                             capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    probe = ("import nmt.config as c; print(c.__file__); import json; print(json.dumps(sorted(c.shipped_configs()))); "
             "print(c.load_config('demo').train.time_budget_s)")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(site)})
    assert loaded.returncode == 0, loaded.stderr
    where, names, budget = loaded.stdout.splitlines()
    assert where.startswith(str(site))
    assert json.loads(names) == sorted(path.stem for path in (repo / "configs").glob("*.yaml"))
    assert float(budget) == load_config(repo / "configs" / "demo.yaml").train.time_budget_s


def test_yaml_anchors_and_merge_keys_share_settings_and_x_keys_hold_them(tmp_path):
    """`<<: *shared` (YAML's merge key, as OpenNMT-py and docker-compose files share settings) stopped at "invalid
    YAML (could not determine a constructor for the tag ...merge)"; a top-level `x-` key holds the anchors, as
    docker-compose's extension fields do, and names no section."""
    text = ("x-small: &small\n  embed_dim: 64\n  num_heads: 4\n  ff_dim: 128\n"
            "model:\n  <<: *small\n  ff_dim: 256\n  num_layers: 2\n"
            "decode: &decode\n  beam_size: 3\n")
    cfg = load_config(write(tmp_path, text))
    assert (cfg.model.embed_dim, cfg.model.num_heads, cfg.model.ff_dim, cfg.model.num_layers) == (64, 4, 256, 2)
    assert cfg.decode.beam_size == 3
    with pytest.raises(ConfigError, match=r"duplicate key 'ff_dim' \(line 6\)"):  # a key given twice still is refused
        load_config(write(tmp_path, "x-small: &small\n  embed_dim: 64\nmodel:\n  <<: *small\n  ff_dim: 256\n"
                                    "  ff_dim: 512\n"))
    with pytest.raises(ConfigError, match=r"unknown key small; valid keys: .* \(a key that holds YAML anchors: "
                                          r"name it x-small\)"):  # only x- keys name no section
        load_config(write(tmp_path, "small: &small\n  embed_dim: 64\nmodel:\n  <<: *small\n"))


@pytest.mark.parametrize("text,said", [
    ("train:\n  seed: " + "9" * 5000 + "\n", "line 2: a number of 5,000 digits, past any setting's (64 bits at most)"),
    ("train:\n  lr: " + "9" * 5000 + "\n", "line 2: a number of 5,000 digits"),
])
def test_a_number_past_pythons_digit_limit_is_named_not_an_internal_error(tmp_path, text, said):
    """PyYAML reads a plain number through int(), which refuses more than 4,300 digits with a ValueError: it was
    "internal error ValueError: Exceeds the limit (4300 digits) for integer string conversion"."""
    with pytest.raises(ConfigError, match="^" + re.escape(f"{tmp_path / 'c.yaml'}: {said}")):
        load_config(write(tmp_path, text))
    with pytest.raises(ConfigError, match="^--set train.seed: a number of 5,000 digits"):
        load_config(write(tmp_path, "{}\n"), overrides=["train.seed=" + "9" * 5000])


def test_a_value_in_an_error_is_cut_short(tmp_path):
    """A value is shown as it was given, to a length: an alias bomb (each list nine of the one before, eight deep:
    43 million strings, read in no time as shared references) made a message of 254 MB in 8 s and 815 MB of memory;
    a setting of 5 MB of text, a message of 5 MB."""
    levels = ['  - &a ["x","x","x","x","x","x","x","x","x"]']
    for previous, name in zip("abcdefg", "bcdefgh"):
        levels.append(f"  - &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    bomb = write(tmp_path, "train:\n  lr:\n  " + "\n  ".join(levels) + "\n")
    shown = r"^train.lr must be float, got \[\['x', 'x', 'x', 'x', \.\.\.\], .*\(list\)$"
    with pytest.raises(ConfigError, match=shown) as refused:
        load_config(bomb)
    assert len(str(refused.value)) < 300
    with pytest.raises(ConfigError, match=r"^model.arch must be one of .*; got 'xxx.*\.\.\..*xxx'$") as refused:
        load_config(write(tmp_path, "model:\n  arch: " + "x" * 5_000_000 + "\n"))
    assert len(str(refused.value)) < 300


@pytest.mark.parametrize("text,said", [
    ("train:\n\tlr: 1\n", "line 2, column 1: invalid YAML: found character '\\t' that cannot start any token (while "
                          "scanning for the next token)"),
    ("model: [\n", "line 2, column 1: invalid YAML: expected the node content, but found '<stream end>' (while "
                   "parsing a flow node)"),
    ("train: !!python/object/apply:os.system [echo]\n", "line 1, column 8: invalid YAML: could not determine a "
                                                        "constructor for the tag"),
], ids=["tab", "unclosed", "python-tag"])
def test_invalid_yaml_says_where_and_what(tmp_path, text, said):
    # "invalid YAML (while scanning for the next token)" named neither the line nor the tab that broke it.
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert str(raised.value).startswith(f"{path} {said}")
