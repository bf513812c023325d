"""What a format module defines, and the helpers they share.

Each module in this package defines:
- NAME: the format's id in the plan's `candidate.format` ("shell", "skypilot", ...);
- TITLE: how the card and the one-line refusals name it ("SkyPilot task");
- claims(document) -> bool: whether the file is this format (no two modules claim one file);
- read(document) -> list[Found]: every deployment in the file, in file order; a refusal raises
  BadInput with one line that names the kind recognised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from apron.deploy.candidate import Found, Sourced
from apron.deploy.invocation import Invocation, find_invocation, visible_devices
from apron.deploy.serve_args import Arg
from apron.deploy.shell import read_script
from apron.errors import BadInput

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

# Helm's references and control lines ({{ .Values.x }}, {{- if }}); Jinja's block tags ({% if %}) only
# where the text is not YAML as it stands (a chat template inside a ConfigMap uses them too).
_HELM = re.compile(
    r"\{\{-?\s*(\.Values|\.Release|\.Chart|\$\.|include\b|template\b|toYaml\b)|^\s*\{\{-?\s*(if|range|with|end|define)\b",
    re.M,
)
_JINJA = re.compile(r"^\s*\{%-?\s*(if|for|set|block|macro)\b", re.M)
_KEY = re.compile(r"[\w.\-/]+")
_PYTHON = re.compile(r"^(import [\w.]+|from [\w.]+ import .+)$", re.M)
_PYTHON_BODY = re.compile(r"^(def |class |@\w|if __name__ ==)", re.M)


@dataclass
class Document:
    name: str  # as the user gave it (or "stdin")
    text: str
    path: Path | None = None

    @cached_property
    def yaml(self) -> list[Any] | None:
        """The YAML documents (nulls dropped); None when the text is not YAML."""
        if self.is_template:
            return None
        docs, error = self._parsed
        if error is not None and self.name.endswith((".yaml", ".yml")):
            raise BadInput(f"{self.name}: not valid YAML ({error})")
        return docs

    @cached_property
    def _parsed(self) -> tuple[list[Any] | None, str | None]:
        try:
            import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs
        except ImportError:
            if self.name.endswith((".yaml", ".yml")):
                raise BadInput(f"{self.name}: reading YAML needs PyYAML: pip install 'apron[candidates]'") from None
            return None, None
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            return [d for d in yaml.load_all(self.text, Loader=loader) if d is not None], None
        except yaml.YAMLError as exc:
            return None, " ".join(str(exc).split())[:200]

    @property
    def mappings(self) -> list[dict[str, Any]]:
        """The YAML documents when every one is a mapping; [] otherwise (a command line reads as a string)."""
        docs = self.yaml
        return docs if docs and all(isinstance(d, dict) for d in docs) else []

    @property
    def mapping(self) -> dict[str, Any] | None:
        docs = self.mappings
        return docs[0] if len(docs) == 1 else None

    @property
    def is_yaml_data(self) -> bool:
        """YAML mappings keyed by names: a YAML format's file. (A command line whose JSON argument
        holds `": "` also reads as a mapping, but its key is the command, blanks and all.)"""
        docs = self.mappings
        return bool(docs) and all(all(_KEY.fullmatch(str(k)) for k in doc) for doc in docs)

    @cached_property
    def is_template(self) -> bool:
        if _HELM.search(self.text):
            return True
        return bool(_JINJA.search(self.text)) and self._parsed[1] is not None

    @cached_property
    def is_python(self) -> bool:
        return bool(_PYTHON.search(self.text)) and bool(_PYTHON_BODY.search(self.text) or "(" in self.text)


def is_data(document: Document) -> bool:
    """Neither an unrendered template nor a program: a file the YAML readers may claim."""
    return not document.is_template and not document.is_python


def mapping(value: Any, where: str) -> dict[str, Any]:
    """A YAML mapping field ({} when absent); any other shape is bad input naming the field."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadInput(f"{where} must be a mapping, not {type(value).__name__} {str(value)[:40]!r}")
    return value


def entries(value: Any, where: str) -> list[dict[str, Any]]:
    """A YAML list of mappings ([] when absent); any other shape is bad input naming the field."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise BadInput(f"{where} must be a list of mappings")
    return value


def words(value: Any, where: str) -> list[str]:
    """A container's command or args: a list of words (or one string)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or any(isinstance(v, (dict, list)) for v in value):
        raise BadInput(f"{where} must be a list of words")
    return [_word(v) for v in value]


def count(value: object, where: str) -> int | None:
    """A GPU or node count: a whole number >= 1 (YAML may give it as a string)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise BadInput(f"{where}: {value!r} is not a whole number")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise BadInput(f"{where}: {value!r} is not a whole number") from None
    if number < 1:
        raise BadInput(f"{where}: {number} must be 1 or more")
    return number


def node(doc: Any, *path: str | int) -> Any:
    """doc[path...], None where any step is missing or of another type."""
    for key in path:
        if isinstance(key, int):
            doc = doc[key] if isinstance(doc, list) and -len(doc) <= key < len(doc) else None
        else:
            doc = doc.get(key) if isinstance(doc, dict) else None
        if doc is None:
            return None
    return doc


def strings(value: Any, where: str) -> list[str]:
    """A YAML list of words (numbers and booleans as vLLM's config loader writes them)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadInput(f"{where} must be a list of words")
    return [_word(v) for v in value]


def _word(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def flags_from_mapping(values: dict[str, Any], where: str, negatable: set[str] | None = None) -> list[Arg]:
    """vLLM's own reading of a YAML map of options (utils/argparse_utils.py load_config_file,
    0.33.0:606): true -> --key, false -> --no-key where the parser has it (else nothing), a list ->
    --key item..., a mapping -> --key JSON, anything else -> --key value."""
    import json

    out: list[Arg] = []
    for key, value in values.items():
        at = f"{where}.{key}" if where else str(key)
        flag = "--" + str(key).removeprefix("--")
        if isinstance(value, bool):
            no = "--no-" + flag[2:]
            if value:
                out.append(Arg(flag, at))
            elif negatable is None or no in negatable:
                out.append(Arg(no, at))
        elif isinstance(value, list):
            if value:
                out += [Arg(flag, at)] + [Arg(_word(v), at) for v in value]
        elif isinstance(value, dict):
            out += [Arg(flag, at), Arg(json.dumps(value), at)]
        elif value is not None:
            out += [Arg(flag, at), Arg(_word(value), at)]
    return out


def script_founds(text: str, where: str, env: dict[str, str] | None = None) -> list[Found]:
    """Every vLLM start in a shell script, with the script's own variables substituted."""
    script = read_script(text, where, env)
    prefix = f"{where}: " if where else ""
    out: list[Found] = []
    for n, command in enumerate(script.commands):
        words = [Arg(w.text, f"{prefix}line {w.line}", w.unresolved) for w in command.words]
        invocation = find_invocation(words, lambda arg: _nested(arg, where))
        if invocation is None:
            continue
        env_list = [(k, v.value, _line(prefix, v.line), bool(v.unresolved)) for k, v in command.exported]
        env_list += [(k, v, f"{prefix}line {line}", "$" in v) for k, v, line in command.env]
        found = found_from(invocation, _span(prefix, command.first_line, command.last_line), env_list)
        if command.ended_by_comment:
            found.notes.append(_cut_note(script.commands[n + 1 :], prefix, command.last_line))
        out.append(found)
    return out


def _nested(arg: Arg, where: str) -> Invocation | None:
    """`sh -c "..."`: the string is a script of its own."""
    founds = script_founds(arg.text, f"{arg.where} (the -c script)" if where else "the -c script")
    if not founds:
        return None
    found = founds[0]
    return Invocation(found.entry, found.argv, found.env, None, found.engine, found.gpu_count, found.notes)


def _line(prefix: str, line: int) -> str:
    """Where a variable was set: a line of the script, or the environment its caller gives it."""
    return f"{prefix}line {line}" if line else "environment"


def _span(prefix: str, first: int, last: int) -> str:
    return f"{prefix}line {first}" if first == last else f"{prefix}lines {first}-{last}"


def _cut_note(rest: list[Any], prefix: str, last: int) -> str:
    orphans = next((c for c in rest if c.words and c.words[0].text.startswith("-")), None)
    lost = " ".join(w.text for w in orphans.words) if orphans else "nothing"
    return (
        f"{prefix}a comment line after line {last} ends the vllm serve command (bash runs the lines after it "
        f"as a new command), so these are not passed to vLLM: {lost}"
    )


def found_from(invocation: Invocation, where: str, env: list[tuple[str, str, str, bool]]) -> Found:
    env = env + invocation.env
    found = Found(invocation.argv, where, invocation.entry, engine=invocation.engine, notes=list(invocation.notes))
    found.env = _last_wins(env)
    found.gpu_count = invocation.gpu_count or visible_devices(env)
    return found


def _last_wins(env: list[tuple[str, str, str, bool]]) -> list[tuple[str, str, str, bool]]:
    seen: dict[str, tuple[str, str, str, bool]] = {}
    for item in env:
        seen.pop(item[0], None)
        seen[item[0]] = item
    return list(seen.values())


def name_of(found: Found, index: int) -> str:
    """A deployment's name: the file's, else its served model name, else the model, else its place."""
    if found.name:
        return found.name
    words = [a.text for a in found.argv]
    for option in ("--served-model-name", "--served_model_name", "--model"):
        for i, word in enumerate(words):
            if word == option and i + 1 < len(words):
                return words[i + 1]
            if word.startswith(option + "="):
                return word.partition("=")[2]
    if words and not words[0].startswith("-"):
        return words[0]
    if found.model is not None:
        return str(found.model.value)
    return f"deployment {index + 1}"


def sourced_count(value: object, where: str) -> Sourced | None:
    number = count(value, where)
    return None if number is None else Sourced(number, where)


def with_config_file(found: Found, document: Document) -> Found:
    """`--config FILE` read as vLLM reads it (utils/argparse_utils.py _pull_args_from_config,
    0.33.0:516): the file's flags after the model and before the other arguments, so that the command
    line wins. The file is looked for beside the deployment file; where it is not, the flag stays as
    written (not planned) and a note says so."""
    from apron.deploy.options import release_options

    texts = [a.text for a in found.argv]
    at = next((i for i, t in enumerate(texts) if t == "--config" or t.startswith("--config=")), None)
    if at is None:
        return found
    name = texts[at].partition("=")[2] if "=" in texts[at] else (texts[at + 1] if at + 1 < len(texts) else "")
    path = Path(name).expanduser()
    if not path.is_absolute() and document.path is not None:
        path = document.path.parent / path
    if not name or not path.is_file():
        found.notes.append(
            f"--config {name} ({found.argv[at].where}) is not beside {document.name}: its flags are not read"
        )
        return found
    config = Document(str(path), path.read_text(errors="replace"), path).mapping
    if config is None:
        raise BadInput(f"{document.name}: --config {name} ({found.argv[at].where}) is not a YAML mapping of options")
    flags = [Arg(a.text, f"{name}: {a.where}") for a in flags_from_mapping(config, "", set(release_options().options))]
    end, given_at = at + (1 if "=" in texts[at] else 2), found.argv[at].where
    model = 1 if texts and not texts[0].startswith("-") else 0
    found.argv = found.argv[:model] + flags + found.argv[model:at] + found.argv[end:]
    found.notes.append(f"the flags of {name} (--config, {given_at}) are read in, before the command line's own")
    return found
