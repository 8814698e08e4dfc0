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
