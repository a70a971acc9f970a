# Two commands set everything up on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The released wire contract: `make test` fails on a change that breaks it (buf breaking).
CONTRACT := proto/contract/dsfro-v1.binpb

.PHONY: serve test lint proto contract bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[server,slurm,dev,ray,plot,otel]'
	touch $(STAMP)

## Start the gRPC service on 127.0.0.1:50051 (DSFRO_HOST / DSFRO_PORT override).
serve: $(STAMP)
	$(BIN)/python server.py

## Lint, type-check and run the whole test suite; check proto/ against the released contract.
test: $(STAMP)
	$(BIN)/buf lint
	$(BIN)/buf breaking proto --against $(CONTRACT)
	$(BIN)/ruff check solver tests scripts server.py
	$(BIN)/mypy
	$(BIN)/python -m pytest

## Lint proto/ (buf lint, buf format) and the Python code (ruff); `buf format -w` fixes format.
lint: $(STAMP)
	$(BIN)/buf lint
	$(BIN)/buf format -d --exit-code
	$(BIN)/ruff check solver tests scripts server.py

## Regenerate the checked-in gRPC code from proto/.
proto: $(STAMP)
	$(BIN)/python scripts/gen_proto.py

## Rewrite the released contract from proto/: run only when tagging a release of the API.
contract: $(STAMP)
	$(BIN)/buf lint
	$(BIN)/buf build -o $(CONTRACT)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
