import pytest
from typer.testing import CliRunner

from nmt.cli import app

COMMANDS = ["download", "prepare", "train", "translate", "evaluate", "plot", "export", "serve", "average"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(command):
    result = CliRunner().invoke(app, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert "Example:" in result.output and f"nmt {command}" in result.output


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


def test_debug_after_a_double_dash_is_an_argument():
    from nmt.cli import _without_debug

    assert _without_debug(["translate", "--debug", "--", "--debug"]) == (["translate", "--", "--debug"], True)
    assert _without_debug(["translate", "hi"]) == (["translate", "hi"], False)
