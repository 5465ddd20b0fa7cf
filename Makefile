# Two commands do all the set-up on a fresh machine:
#   make audit   -- the main job (crowdrank audit on its embedded default)
#   make test    -- the test suite
PYENV_PY := $(shell ls -d $$HOME/.pyenv/versions/3.12*/bin/python 2>/dev/null | tail -n 1)
PYTHON ?= $(if $(PYENV_PY),$(PYENV_PY),python3.12)
VENV := .venv
BIN := $(VENV)/bin
OUT ?= audit-out
# the suite on both cores: whole files (or explicit xdist groups) per worker, heaviest
# first (tests/conftest.py, pytest_collection_modifyitems); JOBS=1 runs one process
JOBS ?= 2
XDIST := $(if $(filter 1,$(JOBS)),,-n $(JOBS) --dist loadgroup --no-loadscope-reorder)

.PHONY: venv test test-fast test-times audit story bench lint clean mutate results

$(BIN)/crowdrank: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(BIN)/crowdrank

venv: $(BIN)/crowdrank

test: venv
	$(BIN)/python -m pytest -q $(XDIST)

test-fast: venv
	$(BIN)/python -m pytest -q $(XDIST) -m "not slow"

# the suite with CPU seconds per test (docs/testing.md, "The suite's time")
test-times: venv
	PYTHONPATH=bench $(BIN)/python -m pytest -q -p pytest_cputime

audit: venv
	$(BIN)/crowdrank audit --out $(OUT)

story: venv
	$(BIN)/crowdrank story --prior-predictive --out story-out

bench: venv
	$(BIN)/python bench/run_all.py

# mutation testing of the core modules against targeted fast tests (hours on 2 cores;
# one module at a time: make mutate ARGS="--modules gate")
mutate: venv
	nice -n 10 $(BIN)/python bench/mutation.py $(ARGS)

# docs/results.md from bench/results/*.json, so published figures cannot drift
results: venv
	$(BIN)/python bench/render_results.py

lint: venv
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) audit-out story-out
