"""scripts/lowest_versions.py: the floors of pyproject.toml as the pins scripts/test_lowest_versions.sh installs."""

import importlib.util
import json
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="the script reads pyproject.toml with Python 3.11's tomllib")
ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("lowest_versions", ROOT / "scripts" / "lowest_versions.py")
lowest_versions = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lowest_versions)


def pyproject(dependencies, **extras):
    return {"project": {"dependencies": dependencies, "optional-dependencies": extras}}


def test_each_floor_becomes_a_pin_once_torch_left_to_its_own_check():
    pins = lowest_versions.lowest_pins(pyproject(
        ["torch>=2.4", "typer>=0.16", "PyYAML >= 6"],
        serve=["fastapi>=0.100", "pydantic>=2.0.2"], dev=["fastapi>=0.100", "nmt[serve]>=0.1"]))
    assert pins == ["typer==0.16", "pyyaml==6", "fastapi==0.100", "pydantic==2.0.2", "nmt==0.1"]


def test_an_environment_marker_stays_on_its_pin():
    # httpx2 (which starlette's test client prefers) installs on Python 3.11+ only: the pin must keep that condition.
    pins = lowest_versions.lowest_pins(pyproject([], dev=["httpx>=0.24", "httpx2>=2.0; python_version >= '3.11'",
                                                          "tomli >= 1.1 ;python_version<'3.11'"]))
    assert pins == ["httpx==0.24", "httpx2==2.0; python_version >= '3.11'", "tomli==1.1; python_version<'3.11'"]


@pytest.mark.parametrize("requirement", ["numpy", "numpy<2", "numpy>=1.24,<2", "numpy~=1.24"])
def test_a_requirement_without_a_plain_floor_is_named(requirement):
    with pytest.raises(SystemExit, match="no `>=` floor"):
        lowest_versions.lowest_pins(pyproject([requirement]))


def test_two_floors_of_one_package_are_refused():
    with pytest.raises(SystemExit, match="fastapi: two floors, 0.100 and 0.110"):
        lowest_versions.lowest_pins(pyproject([], serve=["fastapi>=0.100"], dev=["fastapi>=0.110"]))


def test_the_floors_declared_are_those_the_recorded_run_installed():
    # A floor moved without running scripts/test_lowest_versions.sh is a promise nobody checked (typer>=0.9 was one).
    with open(ROOT / "pyproject.toml", "rb") as f:
        declared = lowest_versions.lowest_pins(tomllib.load(f))
    recorded = json.loads((ROOT / "results" / "tests-lowest-versions-cpu-avx2.json").read_text())
    assert declared == recorded["pins"] and recorded["exit_status"] == 0 and not recorded["failed"]
