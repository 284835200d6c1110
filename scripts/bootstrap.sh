#!/usr/bin/env bash
# Prepare a fresh Debian/Ubuntu machine for keymanager and install what one purpose needs:
#
#   scripts/bootstrap.sh run     the service's runtime dependencies only           (make run)
#   scripts/bootstrap.sh sdk     + the SDK and kmctl                               (make sdk)
#   scripts/bootstrap.sh test    + the dev extra (pytest, ruff, mypy, the bench's) and the SDK  (make test)
#   scripts/bootstrap.sh bench   + the bench extra and the SDK                     (make bench)
#
# Each step prints what it does and how long it usually takes (on a 2-core machine, no pip
# cache), then how long it took; a step already done is skipped. System packages come from
# apt-get only when it may (root, or sudo without a password); otherwise it says exactly what
# to install and stops.
set -euo pipefail
cd "$(dirname "$0")/.."

purpose=${1:-run}
PYTHON=${PYTHON:-python3}
SOFTHSM_LIB=/usr/lib/softhsm/libsofthsm2.so
VENV=.venv
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)

case "$purpose" in
  run) stamp=$VENV/.installed-run ;;
  sdk) stamp=$VENV/.installed-sdk ;;
  bench) stamp=$VENV/.installed-bench ;;
  test) stamp=$VENV/.installed ;;  # everything: also satisfies run, sdk and bench
  *) echo "usage: $0 run|sdk|test|bench" >&2; exit 2 ;;
esac

step_started=0
step() {  # step "what it does" "how long it usually takes"
  printf '==> %s (usually %s)\n' "$1" "$2"
  step_started=$SECONDS
}
step_done() {
  printf '    done in %d s\n' $((SECONDS - step_started))
}

apt_install() {
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
  else
    echo "keymanager needs the Debian packages: $*" >&2
    echo "install them with:  sudo apt-get install -y $*" >&2
    exit 1
  fi
}

fresh() {  # fresh STAMP: the stamp exists and is newer than every pyproject.toml
  [ -f "$1" ] && [ ! pyproject.toml -nt "$1" ] && { [ ! -f sdk/pyproject.toml ] || [ ! sdk/pyproject.toml -nt "$1" ]; }
}

missing=()
# SoftHSM only where it is the module in use (a real HSM: KM_PKCS11_MODULE) or the tests need it.
case "$purpose:${KM_PKCS11_MODULE:-$SOFTHSM_LIB}" in
  test:* | *softhsm*) [ -e "$SOFTHSM_LIB" ] || missing+=(softhsm2) ;;
esac
command -v "$PYTHON" >/dev/null || missing+=(python3)
if command -v "$PYTHON" >/dev/null && ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
  missing+=(python3-venv)
fi
if [ "$purpose" = test ] || [ "$purpose" = bench ]; then
  command -v wrk >/dev/null || missing+=(wrk)  # the bench's HTTP ceilings and --driver wrk
fi
if [ "$purpose" = test ]; then
  command -v jq >/dev/null || missing+=(jq)  # the README's curl examples, run by the e2e tests
  command -v chromium >/dev/null || missing+=(chromium)  # the bench report's test renders it headless; tests/ui drives it
  command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)  # tests/replicas/test_pgbouncer.py
  # tests/bench/test_scaleout.py checks the balancer's config with it; test_client_addresses.py balances through it
  command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
fi
if [ ${#missing[@]} -gt 0 ]; then
  step "installing the Debian packages ${missing[*]}" "20-60 s"
  apt_install "${missing[@]}"
  step_done
fi

if fresh "$stamp" || fresh "$VENV/.installed"; then
  exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
  step "creating the virtualenv $VENV" "5-10 s"
  "$PYTHON" -m venv "$VENV"
  step_done
fi

# setuptools' notice about editable installs is not ours to act on.
export PYTHONWARNINGS=ignore
case "$purpose" in
  run)
    step "installing keymanager and its runtime dependencies into $VENV (~30 packages)" "15-40 s"
    "${PIP[@]}" -e .
    step_done
    ;;
  sdk)
    step "installing keymanager, the SDK and kmctl into $VENV (~40 packages)" "20-60 s"
    "${PIP[@]}" -e . -e './sdk[cli]'
    step_done
    ;;
  bench)
    step "installing keymanager, the SDK and the bench's packages (boto3, moto[kms], rich, psutil, pykmip, ...) into $VENV" "1-2 min"
    "${PIP[@]}" -e '.[bench]' -e ./sdk
    step_done
    ;;
  test)
    step "installing keymanager with the test and lint tools (pytest, ruff, mypy, ..., PyKMIP and pymongocrypt for the KMIP proofs), the SDK and kmctl into $VENV (~115 packages)" "1-3 min"
    "${PIP[@]}" -e '.[dev]' -e './sdk[cli]'
    step_done
    ;;
esac
# pip compiled the packages it installed; ours are editable, so compile them now: the first start
# then does not spend its first seconds compiling in silence, nor does every server the tests start
# where PYTHONDONTWRITEBYTECODE is set (about a second of CPU per process otherwise).
step "compiling keymanager's modules" "2-5 s"
"$VENV/bin/python" -m compileall -q keymanager sdk/keymanager_sdk
step_done
touch "$stamp"
