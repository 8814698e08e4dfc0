"""tests/cli_process.py: a command forked from the server answers as `python -m nmt` in a subprocess does."""

import os
import subprocess
import sys

import pytest

from cli_process import run_cli


def both_ways(args, **kwargs):
    forked = run_cli(args, dict(os.environ), **kwargs)
    plain = subprocess.run([sys.executable, "-m", "nmt", *args], capture_output=True, env=dict(os.environ), **kwargs)
    return forked, plain


@pytest.mark.parametrize("args, input, returncode", [
    (["--help"], None, 0),
    (["score", "--run", "/nonexistent"], "a\tb\n", 2),  # a one-line error
    (["translate", "--bogus"], None, 2),  # a usage error
    (["translate", "--run", "RUN"], "we have two cats .\r\nthey have six keys .\rok\n", 0),  # lines end at \n only
    (["translate", "--run", "RUN"], b"caf\xe9 .\nwe have two cats .\n", 0),  # not UTF-8, in and out as bytes
], ids=["help", "error", "usage", "stdin-text", "stdin-bytes"])
def test_a_forked_command_answers_as_a_subprocess_does(args, input, returncode, tmp_path, request):
    if "RUN" in args:
        args = [str(request.getfixturevalue("toy_transformer_run")) if arg == "RUN" else arg for arg in args]
    text = not isinstance(input, bytes)
    forked, plain = both_ways(args, input=input, text=text, cwd=tmp_path)
    assert (forked.returncode, forked.stdout, forked.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert forked.returncode == returncode, forked.stderr
    if input and returncode == 0:  # a line out per line in
        assert len(forked.stdout.splitlines()) == 2


@pytest.mark.skipif(os.environ.get("NMT_TEST_SUBPROCESS") == "1", reason="NMT_TEST_SUBPROCESS=1: nothing is forked")
def test_the_child_takes_the_calls_directory_and_nmt_variables(tmp_path, monkeypatch):
    """`nmt translate` with no --run looks for runs/ under the working directory; an NMT_* variable reaches the
    child (NMT_CORPUS_URL, the corpus `nmt download` takes), and pytest's own (the running test's name) change
    nothing; a variable torch or Python may read as they import starts a plain subprocess."""
    import cli_process

    forked_before = cli_process.forked_calls
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "another test (call)")
    lost = run_cli(["translate", "hello"], dict(os.environ), cwd=tmp_path)
    assert lost.returncode == 2 and lost.stderr.startswith("error: no trained run found under runs/")
    missing = tmp_path / "elsewhere.zip"
    download = run_cli(["download", "--data-dir", str(tmp_path / "data")],
                       {**os.environ, "NMT_CORPUS_URL": str(missing)})
    assert download.returncode == 2 and download.stderr == f"error: corpus archive not found: {missing}\n"
    assert cli_process.forked_calls == forked_before + 2
    with pytest.warns(UserWarning, match=r"a plain subprocess for the CLI: .* in \['OMP_NUM_THREADS'\]"):
        threads = run_cli(["--help"], {**os.environ, "OMP_NUM_THREADS": "1"})
    assert threads.returncode == 0 and cli_process.forked_calls == forked_before + 2


def test_a_command_past_its_timeout_is_killed(tmp_path, toy_transformer_run):
    """As subprocess.run: TimeoutExpired, and the next command runs (the child reads a FIFO nobody writes)."""
    fifo = tmp_path / "never"
    os.mkfifo(fifo)
    with pytest.raises(subprocess.TimeoutExpired):
        run_cli(["evaluate", "--run", str(toy_transformer_run), "--src", str(fifo), "--ref", str(fifo)],
                dict(os.environ), timeout=3)
    assert run_cli(["--help"], dict(os.environ)).returncode == 0
