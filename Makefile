# keymanager: `make run` installs the service, the SDK and kmctl (runtime packages only) and serves
# on https://127.0.0.1:$KM_PORT (8443); `make test` installs the test tools too and runs the checks
# (lint, types, every test but the interop ones); `make test-interop` runs the rest: other people's
# suites and clients (the Encryption SDK's, PyKMIP's, libmongocrypt, the AWS CLI, schemathesis,
# hypothesis) and the bench's smoke and report tests (wrk, Chromium). CI runs both.
# `make setup` installs the service alone; `make bench` runs the benchmark's report
# (`make bench BENCH_ARGS="report --quick --spawn"`: the same in about 3 minutes).
VENV := .venv
BIN := $(VENV)/bin
BENCH_ARGS ?= report --spawn

.PHONY: setup sdk setup-test setup-bench run init test test-interop test-hsm lint typecheck pytest bench clean

# pytest-xdist: one process per core (PYTEST_WORKERS=0: none), tests that share a server kept on one
# worker (tests/conftest.py groups them: --dist loadgroup).
PYTEST_WORKERS ?= auto
XDIST = -n $(PYTEST_WORKERS) --dist loadgroup

# The tests that prove an HSM: the adapter (less its SoftHSM-only files), imports, the API's and the KMS
# door's cryptography over real TLS. `make test-hsm` runs them on KM_TEST_PKCS11_MODULE (default SoftHSM).
# Asymmetric keys are proven there by tests/hsm/test_key_pairs.py (tests/e2e/test_asymmetric.py assumes
# EC key pairs and AES-GCM, which openCryptoki's soft token lacks: it runs on SoftHSM in `make test`).
HSM_SUBSET := tests/hsm --ignore=tests/hsm/test_softhsm.py --ignore=tests/hsm/test_quirks.py \
	--ignore=tests/hsm/test_deadlines.py tests/api/test_key_import.py tests/security/test_imports.py \
	tests/e2e/test_server.py tests/kms_api/test_operations.py \
	tests/kms_api/test_default_algorithm.py

setup:
	@./scripts/bootstrap.sh run

sdk:
	@./scripts/bootstrap.sh sdk

setup-test:
	@./scripts/bootstrap.sh test

setup-bench:
	@./scripts/bootstrap.sh bench

init: sdk
	@echo "==> keymanager init: database schema, SoftHSM token, development TLS, first admin, kmctl profile (usually 3-10 s)"
	@start=$$(date +%s) && $(BIN)/keymanager init && echo "    done in $$(( $$(date +%s) - start )) s"

run: init
	@echo "==> starting the service: database, HSM and audit chain checked, then the workers (usually ready in 2-5 s; Ctrl-C stops it)"
	@$(BIN)/keymanager serve

lint: setup-test
	$(BIN)/ruff check keymanager sdk bench tests
	$(BIN)/ruff format --check keymanager sdk bench tests

typecheck: setup-test
	$(BIN)/mypy keymanager
	$(BIN)/mypy sdk/keymanager_sdk

pytest: setup-test
	@mkdir -p var
	$(BIN)/python -m pytest $(XDIST) -m "not interop" --junitxml=var/test-report.xml $(PYTEST_ARGS)

test: lint typecheck pytest

test-interop: setup-test
	@mkdir -p var
	$(BIN)/python -m pytest $(XDIST) -m interop --junitxml=var/test-interop-report.xml $(PYTEST_ARGS)

test-hsm: setup-test
	@mkdir -p var
	$(BIN)/python -m pytest -q -p no:cacheprovider --junitxml=var/test-hsm-report.xml $(HSM_SUBSET) $(PYTEST_ARGS)

bench: setup-bench
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf var $(VENV) .pytest_cache .mypy_cache .ruff_cache
