# keymanager: `make run` sets everything up and serves on https://127.0.0.1:8443; `make test` runs the checks.
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup run init test lint typecheck pytest clean

setup:
	@./scripts/bootstrap.sh

init: setup
	$(BIN)/keymanager init

run: init
	$(BIN)/keymanager serve

lint: setup
	$(BIN)/ruff check keymanager sdk bench tests
	$(BIN)/ruff format --check keymanager sdk bench tests

typecheck: setup
	$(BIN)/mypy keymanager
	$(BIN)/mypy sdk/keymanager_sdk

pytest: setup
	@mkdir -p var
	$(BIN)/python -m pytest --junitxml=var/test-report.xml $(PYTEST_ARGS)

test: lint typecheck pytest

clean:
	rm -rf var $(VENV) .pytest_cache .mypy_cache .ruff_cache
