"""A shell script or a bare command line that starts vLLM: `vllm serve`, the older api_server
module, or `docker run` / `podman run` of the vLLM image (deploy/shell.py reads it as bash does)."""

from __future__ import annotations

import re

from apron.deploy.candidate import Found
from apron.deploy.formats.base import Document, script_founds
from apron.errors import BadInput

NAME = "vllm-command"  # the id earlier releases of Apron gave a command line
TITLE = "shell script or command line"
_STARTS_VLLM = re.compile(r"\bvllm\b|vllm-openai")


def claims(document: Document) -> bool:
    if document.is_template or document.is_python or document.is_yaml_data:
        return False
    return bool(_STARTS_VLLM.search(document.text))


def read(document: Document) -> list[Found]:
    founds = script_founds(document.text, "")
    if not founds:
        raise BadInput(
            f"{document.name}: a shell script that mentions vllm but never starts it (no `vllm serve`, "
            "`python -m vllm.entrypoints.openai.api_server` or `docker run vllm/vllm-openai` command)"
        )
    return founds
