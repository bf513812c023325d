"""A Python program (a Modal app, a script that builds the command): code, not data. Apron does not
run it; it names the kind and asks for the command the program runs."""

from __future__ import annotations

import re

from apron.deploy.candidate import Found
from apron.deploy.formats.base import Document
from apron.errors import BadInput

NAME = "python"
TITLE = "Python program"
_KINDS = (
    (re.compile(r"^\s*(import modal|from modal import)", re.M), "a Modal app"),
    (re.compile(r"^\s*(import bentoml|from bentoml)", re.M), "a BentoML service"),
    (re.compile(r"^\s*(import ray|from ray)", re.M), "a Ray program"),
    (re.compile(r"^\s*from vllm import|^\s*import vllm", re.M), "a Python program using vLLM's library"),
)


def claims(document: Document) -> bool:
    return document.is_python and not document.is_template


def read(document: Document) -> list[Found]:
    kind = next((name for pattern, name in _KINDS if pattern.search(document.text)), "a Python program")
    raise BadInput(
        f"{document.name}: {kind} (Python code, which Apron does not run); give the vllm serve command it "
        "starts, in a text file or on stdin (`--from -`)"
    )
