#!/usr/bin/env bash
# Write the hashed locks of the tested dependency sets from PyPI (uv resolves for Python 3.11 on every
# platform; pip installs them with --require-hashes):
#   requirements-lock.txt      Apron's dependencies and its build backend (the README's install)
#   requirements-dev-lock.txt  the same pins, plus the test and dev extras (scripts/test.sh)
#   scripts/sky-lock.txt       SkyPilot for the sky target's test (its own venv, .cache/sky-venv)
# Needs uv (pip install uv). Run it after changing a dependency range in pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
UV="${UV:-uv}"
compile() {
  local out=$1 header=$2
  shift 2
  {
    echo "# $header"
    echo "# Written by scripts/lock.sh (uv pip compile --generate-hashes --universal --python-version 3.11); do not edit."
    "$UV" pip compile --generate-hashes --universal --python-version 3.11 --no-header --no-annotate \
      --index-url https://pypi.org/simple "$@" 2>/dev/null
  } > "$out.tmp"
  mv "$out.tmp" "$out"
}
BUILD=$'setuptools>=68\nwheel'
compile requirements-lock.txt "Apron's dependencies: pip install --require-hashes -r requirements-lock.txt" \
  pyproject.toml - <<<"$BUILD"
compile requirements-dev-lock.txt "Apron's dependencies with its test and dev extras (scripts/test.sh); the pins of requirements-lock.txt" \
  pyproject.toml --extra test --extra dev -c requirements-lock.txt - <<<"$BUILD"
compile scripts/sky-lock.txt "SkyPilot for the sky target's test: pip install --require-hashes -r scripts/sky-lock.txt" - <<'IN'
skypilot>=0.10,<1
IN
