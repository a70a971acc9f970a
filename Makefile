# Two commands set everything up on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test lint proto bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

## Start the gRPC service on 127.0.0.1:50051 (DSFRO_HOST / DSFRO_PORT override).
serve: $(STAMP)
	$(BIN)/python server.py

## Lint, type-check and run the whole test suite.
test: $(STAMP)
	$(BIN)/ruff check solver tests scripts server.py
	$(BIN)/mypy
	$(BIN)/python -m pytest

## Regenerate the checked-in gRPC code from proto/.
proto: $(STAMP)
	$(BIN)/python scripts/gen_proto.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
