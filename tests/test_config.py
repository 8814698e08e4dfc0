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


@pytest.mark.parametrize("text,pattern", [
    ("train:\n  max_steps: ten\n", r"train\.max_steps must be int"),
    ("train:\n  lr: -1\n", r"train\.lr must be > 0"),
    ("model:\n  arch: rnn\n", r"model\.arch must be one of"),
    ("model: 3\n", r"model must be a mapping"),
    ("train:\n  compile: 1\n", r"train\.compile must be bool"),
])
def test_bad_values(tmp_path, text, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_config(write(tmp_path, text))


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
