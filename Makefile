# Everything a fresh clone needs: `make demo` (end to end) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# A CPU wheel of exactly this version is what the build machines serve locally; GPU users keep their own torch.
TORCH_FALLBACK ?= torch==2.13.0
CORPUS ?= $(or $(NMT_CORPUS_URL),http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip)

.PHONY: install browser test test-fast demo clean

install: $(BIN)/.installed

# The package alone (what `make demo` needs); the test tools come on top of it.
$(BIN)/.installed-base: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q "$(TORCH_FALLBACK)"
	$(BIN)/pip install -q -e .
	touch $@

$(BIN)/.installed: $(BIN)/.installed-base
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

# The page test drives a real Chromium; Debian's packages provide it and its driver (skipped where apt is missing).
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 || \
	  { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium chromium-driver >/dev/null 2>&1; } || \
	  echo "note: could not install chromium; the browser test will be skipped"; \
	else echo "note: no chromium/chromedriver and no apt-get as root; the browser test will be skipped"; fi

# Tests run in parallel processes (pytest-xdist): much of the suite is single-threaded (subprocesses importing
# torch), so two workers on two cores take ~0.65x the serial time. TEST_WORKERS=0 runs serially.
TEST_WORKERS ?= auto
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --maxprocesses=4 --dist worksteal

test: install browser
	$(PYTEST)

test-fast: install
	$(PYTEST) -m "not slow"

demo: $(BIN)/.installed-base
	$(BIN)/nmt download --url "$(CORPUS)"
	$(BIN)/nmt prepare --config configs/demo.yaml
	$(BIN)/nmt train --config configs/demo.yaml
# The demo keeps its last 3 saves (configs/demo.yaml); with fewer than 2 (under ~400 updates in the budget: a very
# slow machine) nothing is averaged and evaluate takes the checkpoint it would without (its first line names it).
# Any other failure of averaging stops the demo.
	$(BIN)/nmt average --run runs/demo --last 3 --allow-fewer
	$(BIN)/nmt evaluate --run runs/demo
	$(BIN)/nmt translate --run runs/demo "i'm home ."

clean:
	rm -rf $(VENV) runs data/fra-eng data/prepared
