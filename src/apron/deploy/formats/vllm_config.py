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


# Keys that make a file another format's (a recipe, a task, a manifest, a chart's values).
_OTHERS = {"run", "setup", "services", "servingEngineSpec", "modelArtifacts", "apiVersion", "kind", "resources"}
_OTHERS |= {"args", "command", "hardware", "gpu", "gpu_count", "vllm_version", "meta", "features", "variants"}


def claims(document: Document) -> bool:
    """A flat map whose keys are, nearly all, vllm serve's long options (a misspelt one is a flag the
    parser refuses, as vLLM would)."""
    doc = document.mapping
    if doc is None or not is_data(document) or not doc or set(map(str, doc)) & _OTHERS:
        return False
    options = release_options().options
    known = sum(f"--{str(k).replace('_', '-')}" in options for k in doc)
    return known >= 1 and known / len(doc) >= 0.75 and not isinstance(doc.get("model"), dict)


def read(document: Document) -> list[Found]:
    doc = document.mapping
    assert doc is not None
    options = set(release_options().options)
    return [Found(flags_from_mapping(doc, "", options), "the file", "vllm serve --config")]
