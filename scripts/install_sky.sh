#!/usr/bin/env bash
# install_sky.sh VENV_DIR UV
#
# A virtualenv with SkyPilot (scripts/sky-lock.txt, hashes required) for tests/test_sky.py, kept apart
# from Apron's own venv: SkyPilot pulls ~100 packages. Idempotent: a venv made from the same lock is
# left as it is (about 0.1 s); a fresh one takes about 10 s with uv from PyPI.
set -euo pipefail
VENV=${1:?usage: install_sky.sh VENV_DIR UV}
UV=${2:?usage: install_sky.sh VENV_DIR UV}
LOCK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/sky-lock.txt"
STAMP="$VENV/.apron-lock-sha256"
want=$(sha256sum "$LOCK" | cut -d' ' -f1)
if [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
  echo "[install_sky] $VENV already matches $(basename "$LOCK")" >&2
  exit 0
fi
echo "[install_sky] installing SkyPilot into $VENV from $(basename "$LOCK")" >&2
rm -rf "$VENV"
"$UV" venv --quiet --python "${PYTHON:-python3}" "$VENV"
"$UV" pip install --quiet --python "$VENV/bin/python" --require-hashes -r "$LOCK"
echo "$want" > "$STAMP"
