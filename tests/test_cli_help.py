import pytest
from typer.testing import CliRunner

from nmt.cli import app

COMMANDS = ["download", "prepare", "train", "translate", "evaluate", "plot", "export", "serve", "average"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(command):
    result = CliRunner().invoke(app, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert "Example:" in result.output and f"nmt {command}" in result.output
    # A repeatable option's value is one path or setting: typer 0.2x wrote "<list[Path]>" and "<list[str]>" there.
    assert "list[" not in result.output.split("Options")[-1]


def test_top_level_help_lists_every_command():
    result = CliRunner().invoke(app, ["--help"], terminal_width=200)
    assert result.exit_code == 0 and all(c in result.output for c in COMMANDS)


def test_version_names_nmt_torch_and_python():
    import platform
    from importlib.metadata import version

    from nmt import __version__

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"nmt {__version__} (torch {version('torch')}, Python {platform.python_version()})\n"


def test_debug_works_after_the_command_too(tmp_path):
    """An error says "re-run with --debug"; users put it after the command, where it was "No such option"."""
    from tests_helpers import nmt

    run = tmp_path / "nowhere"
    for args in (["--debug", "translate", "--run", run, "hi"], ["translate", "--run", run, "hi", "--debug"]):
        result = nmt(*args)
        assert result.returncode == 1 and "Traceback" in result.stderr, result.stderr
        assert result.stderr.rstrip().splitlines()[-1].startswith("nmt.errors.NMTError: ")
    plain = nmt("translate", "--run", run, "hi")
    assert plain.returncode == 2 and plain.stderr.startswith("error: ") and "Traceback" not in plain.stderr


@pytest.mark.parametrize("setting, traceback", [("1", True), ("yes", True), ("0", False), ("false", False),
                                                ("off", False), ("", False)])
def test_nmt_debug_zero_means_no_traceback(tmp_path, monkeypatch, setting, traceback):
    """NMT_DEBUG=0 turned tracebacks on (any non-empty value did)."""
    from tests_helpers import nmt

    monkeypatch.setenv("NMT_DEBUG", setting)
    result = nmt("translate", "--run", tmp_path / "nowhere", "hi")
    assert ("Traceback" in result.stderr) is traceback, result.stderr
    assert result.returncode == (1 if traceback else 2)


def test_debug_after_a_double_dash_is_an_argument():
    from nmt.cli_boundary import without_debug

    assert without_debug(["translate", "--debug", "--", "--debug"]) == (["translate", "--", "--debug"], True)
    assert without_debug(["translate", "hi"]) == (["translate", "hi"], False)


def test_a_run_is_named_the_same_way_by_every_command():
    """`nmt train --run-dir X` then `nmt translate --run-dir X` was "No such option": train said --run-dir, the rest
    --run. Both spellings now name the run folder wherever a command takes one."""
    import typer

    group = typer.main.get_command(app)
    takers = {name: command for name, command in group.commands.items()
              if any({"--run", "--run-dir"} & set(param.opts) for param in command.params)}
    assert {"train", "translate", "evaluate", "score", "plot", "export", "serve", "average"} <= set(takers)
    for name, command in takers.items():
        run_params = [param for param in command.params if {"--run", "--run-dir"} & set(param.opts)]
        assert len(run_params) == 1 and {"--run", "--run-dir"} <= set(run_params[0].opts), name


def test_run_dir_names_the_run_for_translate(tmp_path):
    from tests_helpers import nmt

    run = tmp_path / "nowhere"
    by_run, by_run_dir = (nmt("translate", flag, run, "hi") for flag in ("--run", "--run-dir"))
    assert by_run_dir.returncode == by_run.returncode != 0 and by_run_dir.stderr == by_run.stderr
    assert f"{run} is not a run directory" in by_run_dir.stderr


@pytest.mark.parametrize("option,value,said", [
    ("--length-penalty", "nan", "must be a finite number, got 'nan'"),  # typer's range check: "<= 10"
    ("--length-penalty", "-inf", "must be a finite number, got '-inf'"),
    ("--temperature", "inf", "must be a finite number, got 'inf'"),
    ("--sample-topp", "1.5", "must be between 0 and 1, got 1.5"),
    ("--length-penalty", "11", "must be between 0 and 10, got 11"),
    ("--temperature", "warm", "'warm' is not a number"),
])
def test_a_float_option_names_what_is_wrong_with_it(option, value, said, tmp_path):
    result = CliRunner().invoke(app, ["translate", "--run", str(tmp_path), option, value, "hi"], terminal_width=200)
    assert result.exit_code == 2
    assert said in " ".join(result.output.replace("│", " ").split()), result.output


def test_a_float_option_takes_its_bounds_and_shows_them():
    from nmt.cli import float_between

    parse = float_between(0.0, 10.0)
    assert (parse("0"), parse("10"), parse("2.5e0")) == (0.0, 10.0, 2.5)
    help_text = CliRunner().invoke(app, ["translate", "--help"], terminal_width=200).output
    assert "<float range> [0<=x<=10]" in help_text and "<float range> [0<=x<=1]" in help_text


def test_help_under_a_terminal_that_reports_no_width():
    # COLUMNS=0 (a terminal without a size) is unset to Python's shutil.get_terminal_size; rich took it as a width
    # of 0 and `nmt --help` printed one empty line.
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "nmt", "--help"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "0"})
    assert done.returncode == 0 and "translate" in done.stdout and "Usage: nmt" in done.stdout, done.stdout
