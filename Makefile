# The two commands README.md promises, `make demo` and `make test` (the quick loop), and `make test-all`, the
# full run CI does (.ci/run). Each builds .venv by itself.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Extras the slow suite installs on top of dev: trl (torch, transformers, trl) for the TRL adapter's real
# GRPOTrainer runs, verifiers for the verifiers hook's tests against the real package, verl for the verl adapter's
# run of verl's own agent loop, ray for runs derived on a local two-node Ray cluster and the store read by Ray
# Data. The quick tests that need one of them (marked `extras`) skip in `make test` without it and run here.
SLOW_EXTRAS := dev,trl,verifiers,verl,ray
SLOW_STAMP := $(VENV)/.installed-slow

.PHONY: demo test test-all test-slow lint format schemas bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(SLOW_STAMP): $(STAMP) pyproject.toml Makefile
	$(BIN)/pip install --quiet -e '.[$(SLOW_EXTRAS)]'
	touch $(SLOW_STAMP)

# make demo [STORE=DIR] [PORT=P]: the dashboard on DIR (default $ROLLSCOPE_STORE, else sample_data/); Ctrl-C stops it
demo: $(STAMP)
	$(BIN)/rollscope dashboard $(if $(STORE),--store '$(STORE)') $(if $(PORT),--port $(PORT))

# Three workers on two cores, each taking the next test as it finishes (worksteal): part of the suite's time
# is spent waiting (servers starting, browsers drawing, writers pacing), which a third worker fills (faster
# than two; docs/benchmarks.md, "The test suite"). pyproject's addopts leave out `slow` and `long` tests, so
# plain `pytest` is this quick loop too.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n 3 --dist worksteal

# CI's run: everything `make test` runs plus the `long` tests (browsers, multi-process simulations, paced
# live refresh), then the slow suites and the tests needing an extra, with the extras installed.
test-all: $(SLOW_STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n 3 --dist worksteal -m 'not slow and not extras'
	$(BIN)/python -m pytest -q -m 'slow or extras'

test-slow: $(SLOW_STAMP)
	$(BIN)/python -m pytest -q -m 'slow or extras'

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# After editing the SQL that defines a derived table (queries/sql/views, analyses/macros, raw): its shipped types
schemas: $(STAMP)
	$(BIN)/python -m rollscope.queries.derived_schemas

bench: $(SLOW_STAMP)
	$(BIN)/python -m benchmarks.export_overhead
	$(BIN)/python -m benchmarks.simulate
	$(BIN)/python -m benchmarks.ingest
	$(BIN)/python -m benchmarks.queries
	$(BIN)/python -m benchmarks.dashboard
	$(BIN)/python -m benchmarks.transcripts
	$(BIN)/python -m benchmarks.trl_overhead
	$(BIN)/python -m benchmarks.transcript_store

clean:
	rm -rf $(VENV) *.egg-info
