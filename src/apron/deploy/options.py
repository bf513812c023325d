"""What each vLLM release's `vllm serve` accepts: its parser's options and the environment variables
its envs.py reads (data/serve-options.json.gz, written from each release's own parser by
scripts/serve_options.py). A release without a table of its own is read with the newest table at or
below it, and the candidate says so."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

from packaging.version import InvalidVersion, Version

from apron.frozen import frozen

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

_TABLE = Path(__file__).parent / "data" / "serve-options.json.gz"


@frozen
class Option:
    text: str  # as the parser registers it: --max-model-len, -tp, --no-enforce-eager
    dest: str  # the EngineArgs / frontend field it sets
    nargs: int | str  # 0: a switch; 1: one value; '?', '+', '*' as argparse
    sets: Any = None  # what a switch sets its field to (--enforce-eager True, --no-enforce-eager False)
    default: Any = None  # the field's parser default, for a switch (None: the engine resolves it later)

    @property
    def is_default(self) -> bool:
        """A switch that sets its field to the parser's own default changes nothing."""
        return self.nargs == 0 and self.default is not None and self.sets == self.default


@frozen
class ReleaseOptions:
    version: str  # the release the table was written from
    options: dict[str, Option]
    env: frozenset[str]

    def find(self, text: str) -> Option | None:
        """The option `text` names, as argparse resolves it: exact, else a unique prefix of a long
        option (ArgumentParser's allow_abbrev, on in FlexibleArgumentParser)."""
        if text in self.options:
            return self.options[text]
        if not text.startswith("--"):
            return None
        found = {o.dest: o for name, o in self.options.items() if name.startswith(text) and name.startswith("--")}
        return next(iter(found.values())) if len(found) == 1 else None

    def matches(self, text: str) -> list[str]:
        """The long options `text` abbreviates, where more than one field has one (argparse: ambiguous)."""
        names = sorted(n for n in self.options if text.startswith("--") and n.startswith(text))
        return names if len({self.options[n].dest for n in names}) > 1 else []

    def long_name(self, dest: str) -> str | None:
        """The long option for a field (--tensor-parallel-size for tensor_parallel_size)."""
        mine = [(t, o) for t, o in self.options.items() if o.dest == dest and t.startswith("--")]
        names = [t for t, o in mine if o.nargs != 0 or o.sets is True] or [t for t, _ in mine]
        return min(names, key=len) if names else None


@cache
def _raw() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress(_TABLE.read_bytes()))
    return data


def _key(version: str) -> Version | None:
    try:
        return Version(version)
    except InvalidVersion:
        return None


def table_versions() -> list[str]:
    return sorted(_raw()["releases"], key=lambda v: _key(v) or Version("0"))


@cache
def release_options(version: str | None = None) -> ReleaseOptions:
    """The table for `version` (the newest at or below it; the newest of all for None)."""
    versions = table_versions()
    chosen = versions[-1]
    wanted = _key(version) if version else None
    if wanted is not None:
        below = [v for v in versions if (_key(v) or Version("0")) <= wanted]
        chosen = below[-1] if below else versions[0]
    entry = _raw()["releases"][chosen]
    options = {
        text: Option(text, o["dest"], o["nargs"], o.get("sets"), o.get("default"))
        for text, o in entry["options"].items()
    }
    return ReleaseOptions(chosen, options, frozenset(entry["env"]))
