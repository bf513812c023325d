"""vLLM's own `vllm serve --config FILE.yaml`: a flat map from long option names to values, read as
the release reads it (utils/argparse_utils.py load_config_file, 0.33.0:606): true -> --key, false ->
--no-key where the parser has it, a list -> --key item..., a mapping -> --key JSON. The model is usually
on the command line, not in the file: give it as SOURCE."""

from __future__ import annotations

from apron.deploy.candidate import Found
from apron.deploy.formats.base import Document, flags_from_mapping, is_data
from apron.deploy.options import release_options

NAME = "vllm-config"
TITLE = "vllm serve --config file"


def claims(document: Document) -> bool:
    doc = document.mapping
    if doc is None or not is_data(document) or not doc:
        return False
    options = release_options().options
    return all(f"--{str(k).replace('_', '-')}" in options for k in doc)


def read(document: Document) -> list[Found]:
    doc = document.mapping
    assert doc is not None
    options = set(release_options().options)
    return [Found(flags_from_mapping(doc, "", options), "the file", "vllm serve --config")]
