# The two commands README.md promises: `make demo` and `make test`. Each builds .venv by itself.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow lint format bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# make demo [STORE=DIR] [PORT=P]: the dashboard on DIR (default $ROLLSCOPE_STORE, else sample_data/); Ctrl-C stops it
demo: $(STAMP)
	$(BIN)/rollscope dashboard $(if $(STORE),--store '$(STORE)') $(if $(PORT),--port $(PORT))

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,verifiers]'
	$(BIN)/python -m pytest -q -m slow

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python -m benchmarks.export_overhead
	$(BIN)/python -m benchmarks.simulate
	$(BIN)/python -m benchmarks.ingest
	$(BIN)/python -m benchmarks.queries
	$(BIN)/python -m benchmarks.dashboard

clean:
	rm -rf $(VENV) *.egg-info
