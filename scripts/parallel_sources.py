"""Find, in vLLM source trees, the line of every source Apron's parallel-layout checks cite.

    python scripts/parallel_sources.py TREE [TREE ...]           # print the table (release -> line)
    python scripts/parallel_sources.py --check TREE [TREE ...]   # exit 1 where apron.plan.parallel disagrees

A TREE is an unpacked wheel: a folder holding `vllm/` with `vllm/version.py` or `vllm/_version.py`
(e.g. /work/vllm-src/0.33.0). Each source is an exact line of code (its anchor) and which occurrence
in the file it is; the table in apron.plan.parallel (LINES) is this script's output.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from apron.plan.parallel import LINES, SOURCES


def release(tree: Path) -> str:
    for name in ("_version.py", "version.py"):
        path = tree / "vllm" / name
        if path.exists():
            match = re.search(r"""(?:__version__|version)\s*(?::\s*str\s*)?=\s*['"]([\d.]+)""", path.read_text())
            if match:
                return match.group(1)
    return tree.name


def find(tree: Path) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for key, source in SOURCES.items():
        path = tree / "vllm" / source.file
        lines = path.read_text().splitlines() if path.exists() else []
        hits = [i + 1 for i, line in enumerate(lines) if source.anchor in line]
        found[key] = hits[source.occurrence] if len(hits) > source.occurrence else None
    return found


def main(argv: list[str]) -> int:
    check = argv[:1] == ["--check"]
    trees = [Path(t) for t in (argv[1:] if check else argv)]
    table: dict[str, dict[str, int | None]] = {}
    for tree in trees:
        version = release(tree)
        for key, line in find(tree).items():
            table.setdefault(key, {})[version] = line
    if not check:
        print(json.dumps(table, indent=1, sort_keys=True))
        return 0
    wrong = [
        f"{key} {version}: the tree has line {line}, the table {LINES.get(key, {}).get(version)}"
        for key, by_version in table.items()
        for version, line in by_version.items()
        if LINES.get(key, {}).get(version) != line
    ]
    print("\n".join(wrong) or f"all {len(table)} sources agree in {len(trees)} trees")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
