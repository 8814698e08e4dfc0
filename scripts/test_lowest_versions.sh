#!/usr/bin/env bash
# The test suite against the lowest versions pyproject.toml allows (scripts/lowest_versions.py: every `>=X` installed
# as `==X`, together, so that pip picks what they need beside them), in a throwaway virtual environment. pip keeps
# whatever a user's environment already holds that meets a floor, so each floor is a promise: typer>=0.9 kept a typer
# 0.12 beside click 8.5, under which every command printed nmt's version and exited 0.
#
#   scripts/test_lowest_versions.sh                  # → results/tests-lowest-versions-<machine>.json
#   PYTEST_ARGS="tests/test_serve.py" scripts/test_lowest_versions.sh
#   BASE_PYTHON=python3.10 scripts/test_lowest_versions.sh  # requires-python's floor too (→ ...-py3.10-<machine>.json)
#
# torch is the Makefile's (TORCH=torch==2.4.1 for both floors at once; scripts/test_torch_version.sh checks torch's
# alone). MACHINE names the record's suffix (cpu-avx2, cpu-bf16, cpu-amx: docs/results.md); RECORD overrides the path.
set -euo pipefail
cd "$(dirname "$0")/.."
base_python=${BASE_PYTHON:-python3}
py=$("$base_python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
suffix=$([ "$base_python" = python3 ] && echo "" || echo "-py$py")
venv=${VENV:-/tmp/nmt-lowest-versions$suffix}
torch_requirement=${TORCH:-$(sed -n 's/^TORCH_FALLBACK ?= //p' Makefile)}
machine=${MACHINE:-cpu}
record=${RECORD:-results/tests-lowest-versions$suffix-$machine.json}
log=$venv.log

# The pins are read from pyproject.toml with tomllib (Python 3.11+): by python3 when the venv's Python is 3.10.
reader=$("$base_python" -c "import tomllib" 2>/dev/null && echo "$base_python" || echo python3)
mapfile -t pins < <("$reader" scripts/lowest_versions.py)
rm -rf "$venv"
"$base_python" -m venv "$venv"
"$venv/bin/pip" install -q "$torch_requirement"
"$venv/bin/pip" install -q "${pins[@]}"
"$venv/bin/pip" install -q --no-deps -e .
"$venv/bin/pip" check

start=$(date +%s)
set +e
# Less the one test that compares pyproject's floors with the record this run is about to write: after a floor moves,
# it reads the previous run's record and fails by construction.
"$venv/bin/python" -m pytest -q -n auto --maxprocesses=4 --dist worksteal -p no:cacheprovider -p no:logging \
  --deselect tests/test_lowest_versions.py::test_the_floors_declared_are_those_the_recorded_run_installed \
  ${PYTEST_ARGS:-} 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
seconds=$(( $(date +%s) - start ))

invocation="${TORCH:+TORCH=$TORCH }${RECORD:+RECORD=$RECORD }${suffix:+BASE_PYTHON=$base_python }MACHINE=$machine\
 scripts/test_lowest_versions.sh"
"$venv/bin/python" - "$record" "$status" "$seconds" "$log" "${PYTEST_ARGS:-}" "$(printf '%s\n' "${pins[@]}")" "$invocation" <<'EOF'
import re
import sys
from importlib.metadata import distributions
from pathlib import Path

sys.path.insert(0, "scripts")
from results_record import write_record  # noqa: E402

record, status, seconds, log, args, pins, invocation = sys.argv[1:]  # pins: one a line (a marker holds spaces)
text = Path(log).read_text()
summary = [line for line in text.splitlines() if re.search(r"\d+ (passed|failed)", line)]
# What pip installed beside the pins matters as much (click beside typer, pydantic and starlette beside fastapi).
installed = {d.metadata["Name"].lower(): d.version for d in distributions()}
beside = ("torch", "click", "rich", "pydantic", "starlette", "contourpy", "protobuf")
write_record(Path(record), python=sys.version.split()[0], pins=pins.splitlines(), pytest_args=args,
             installed={name: installed.get(name) for name in (*(p.split("==")[0] for p in pins.splitlines()), *beside)},
             exit_status=int(status), seconds=int(seconds), summary=summary[-1] if summary else None,
             failed=re.findall(r"^FAILED (\S+)", text, flags=re.M),
             command=invocation + (f' (PYTEST_ARGS="{args}")' if args else ""))
EOF
exit "$status"
