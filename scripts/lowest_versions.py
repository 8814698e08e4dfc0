"""The lowest versions pyproject.toml allows, as pins: `name==X` for every `name>=X` it declares (torch left out).

    python scripts/lowest_versions.py            # one pin a line: the dependencies, then every extra's

scripts/test_lowest_versions.sh installs them together and runs the suite: a floor that was never installed is a
promise nobody checked (typer>=0.9 let pip keep a typer 0.12 beside click 8.5, under which every command printed
nmt's version and exited 0). torch's floor has its own check, scripts/test_torch_version.sh 2.4.1.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: nmt runs there, this script reads pyproject.toml with 3.11's reader
    raise SystemExit("scripts/lowest_versions.py needs Python 3.11 or later (tomllib): run it with python3.11")

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
# name, [extras], >= floor, and an optional environment marker that the pin keeps (httpx2 is for Python 3.11+ only).
FLOOR = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*>=\s*([^,;\s]+)\s*(?:;\s*(\S.*?))?\s*$")
SKIPPED = {"torch"}  # its floor is checked by scripts/test_torch_version.sh


def lowest_pins(pyproject: dict) -> list[str]:
    """`name==floor` (its `; marker` kept) for each requirement, in order, each name once; floorless is refused."""
    project = pyproject["project"]
    requirements = [*project["dependencies"], *(r for extra in project.get("optional-dependencies", {}).values()
                                                for r in extra)]
    pins: dict[str, str] = {}
    for requirement in requirements:
        match = FLOOR.match(requirement)
        if not match:
            raise SystemExit(f"{requirement!r}: no `>=` floor to install (give one, or read it here by hand)")
        name, floor, marker = match.group(1).lower(), match.group(3), match.group(4)
        pin = f"{floor}; {marker}" if marker else floor
        if name not in SKIPPED and pins.setdefault(name, pin) != pin:
            raise SystemExit(f"{name}: two floors, {pins[name]} and {pin}")
    return [f"{name}=={pin}" for name, pin in pins.items()]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pyproject", nargs="?", type=Path, default=PYPROJECT, help="default: this repository's")
    with open(parser.parse_args().pyproject, "rb") as f:
        print("\n".join(lowest_pins(tomllib.load(f))))
