#!/usr/bin/env bash
# Prepare a fresh Debian/Ubuntu machine for keymanager: SoftHSM2, a virtualenv, the packages.
# Installs system packages with apt-get only when it may (root, or sudo without a password);
# otherwise it says exactly what to install and stops.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
SOFTHSM_LIB=/usr/lib/softhsm/libsofthsm2.so

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

missing=()
[ -e "$SOFTHSM_LIB" ] || missing+=(softhsm2)
command -v "$PYTHON" >/dev/null || missing+=(python3)
if command -v "$PYTHON" >/dev/null && ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
  missing+=(python3-venv)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  apt_install "${missing[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || { [ -f sdk/pyproject.toml ] && [ sdk/pyproject.toml -nt "$stamp" ]; }; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev]'
  if [ -f sdk/pyproject.toml ]; then .venv/bin/python -m pip install -q -e './sdk[cli]'; fi
  touch "$stamp"
fi
