# The two commands README.md promises: `make demo` and `make test`. Each builds .venv by itself.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Extras the slow suite installs on top of dev: trl (torch, transformers, trl) for the TRL adapter's real
# GRPOTrainer runs, verifiers for the verifiers hook's tests against the real package.
SLOW_EXTRAS := dev,trl,verifiers
SLOW_STAMP := $(VENV)/.installed-slow

.PHONY: demo test test-slow lint format schemas bench clean

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

# Two workers: the default suite is CPU-bound in one process (about 4.3 min on two cores with -n 2).
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n 2

test-slow: $(SLOW_STAMP)
	$(BIN)/python -m pytest -q -m slow

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
	$(BIN)/python -m benchmarks.trl_overhead

clean:
	rm -rf $(VENV) *.egg-info
