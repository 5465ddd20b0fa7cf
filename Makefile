# Two commands do all the set-up on a fresh machine:
#   make audit   -- the main job (crowdrank audit on its embedded default)
#   make test    -- the test suite
PYENV_PY := $(shell ls -d $$HOME/.pyenv/versions/3.12*/bin/python 2>/dev/null | tail -n 1)
PYTHON ?= $(if $(PYENV_PY),$(PYENV_PY),python3.12)
VENV := .venv
BIN := $(VENV)/bin
OUT ?= audit-out
# the suite on both cores: whole files per worker, heaviest first (tests/conftest.py,
# pytest_collection_modifyitems); JOBS=1 runs one process
JOBS ?= 2
XDIST := $(if $(filter 1,$(JOBS)),,-n $(JOBS) --dist loadfile --no-loadscope-reorder)

.PHONY: venv test test-fast test-times audit story bench lint clean mutate results verify docs

$(BIN)/crowdrank: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(BIN)/crowdrank

venv: $(BIN)/crowdrank

# the 25 slowest tests are listed at the end, so a run on a fresh machine shows where its
# time went
test: venv
	$(BIN)/python -m pytest -q $(XDIST) --durations=25

test-fast: venv
	$(BIN)/python -m pytest -q $(XDIST) -m "not slow"

# the suite with CPU seconds per test (docs/testing.md, "The suite's time")
test-times: venv
	PYTHONPATH=bench/tools $(BIN)/python -m pytest -q -p pytest_cputime

audit: venv
	$(BIN)/crowdrank audit --out $(OUT)

story: venv
	$(BIN)/crowdrank story --prior-predictive --out story-out

bench: venv
	$(BIN)/python bench/run_all.py

# mutation testing of the core modules against targeted fast tests (hours on 2 cores;
# one module at a time: make mutate ARGS="--modules gate")
mutate: venv
	nice -n 10 $(BIN)/python bench/tools/mutation.py $(ARGS)

# re-measure the cheap headline rows (online rates, the 450 k streamed fit, MAP vs choix,
# the default audit and its verdicts, cleaned BabyFace) and fail when one left its stated
# noise band (bench/tools/verify.py; about 2 minutes on 2 cores, with an empty XLA cache for the audit)
verify: venv
	nice -n 5 $(BIN)/python bench/tools/verify.py $(ARGS)

# docs/results.md from bench/results/*.json, so published figures cannot drift
results: venv
	$(BIN)/python bench/tools/render_results.py

# the documentation site -> docs/_build/html (open docs/_build/html/index.html): Sphinx,
# MyST-NB and the PyData theme (docs/conf.py); the tutorials are executed and cached
# (docs/_build/.jupyter_cache: an unchanged notebook is not re-run); any warning fails;
# then every link, image and tutorial figure is checked (docs/_ext/check_site.py). The
# gallery's reports are rendered by small seeded runs of the commands, cached in
# docs/_build/.report_examples (docs/_ext/report_examples.py).
# CROWDRANK_DOCS_EXECUTE=off builds without executing the notebooks;
# CROWDRANK_DOCS_EXAMPLES=off (or a list of names) without generating every report.
DOCS_EXECUTE = $(if $(filter off,$(CROWDRANK_DOCS_EXECUTE)),,--tutorials)
docs: $(VENV)/.docs-installed
	$(BIN)/python -m sphinx -b html -W --keep-going -q docs docs/_build/html
	$(BIN)/python docs/_ext/check_site.py docs/_build/html $(DOCS_EXECUTE)

$(VENV)/.docs-installed: $(BIN)/crowdrank
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	touch $@

lint: venv
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) audit-out story-out
