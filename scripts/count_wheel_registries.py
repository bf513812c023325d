#!/usr/bin/env python3
"""Count a vLLM wheel's registries independently of Apron's extractor, to check the shipped facts.

    python scripts/count_wheel_registries.py WHEEL [WHEEL ...] [--check] [--json]

For each wheel it takes the module-level assignments of the registry dicts (model registry,
reasoning and tool parsers, tokenizers) out of the wheel's own files and lets Python itself evaluate
them (the dict displays, `**` spreads and comprehensions, nothing else: no vLLM import, no other
statement runs). It shares no code with `apron.engine.extract`. `--check` compares the counts and
the wheel's sha256 with src/apron/engine/data/vllm-<version>.json.gz and exits 1 on a mismatch.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import json
import re
import sys
import zipfile
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "src" / "apron" / "engine" / "data"
TABLES = {
    "vllm/model_executor/models/registry.py": ["_VLLM_MODELS", "_PREVIOUSLY_SUPPORTED_MODELS", "_OOT_SUPPORTED_MODELS"],
    "vllm/reasoning/__init__.py": ["_REASONING_PARSERS_TO_REGISTER"],
    "vllm/tool_parsers/__init__.py": ["_TOOL_PARSERS_TO_REGISTER"],
    "vllm/tokenizers/registry.py": ["_VLLM_TOKENIZERS"],
}


def evaluate_tables(source: str, wanted: list[str]) -> dict[str, dict]:
    """Run only the top-level `_NAME = {...}` assignments, in order, in an empty namespace."""
    namespace: dict = {"__builtins__": {}}
    for node in ast.parse(source).body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign) and node.value is not None
            else []
        )
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if (
            not names
            or not re.fullmatch(r"_[A-Z0-9_]+", names[0])
            or not isinstance(node.value, (ast.Dict, ast.DictComp))
        ):
            continue
        statement = ast.Assign(targets=[ast.Name(names[0], ast.Store())], value=node.value)
        module = ast.fix_missing_locations(ast.Module(body=[ast.copy_location(statement, node)], type_ignores=[]))
        code = compile(module, "<table>", "exec")
        try:
            exec(code, namespace)  # noqa: S102 - literal dict displays taken out of the wheel
        except (NameError, TypeError, AttributeError):
            continue
    return {name: namespace[name] for name in wanted if name in namespace}


def count_wheel(path: Path) -> dict:
    with zipfile.ZipFile(path) as zf:
        version = next(
            re.fullmatch(r"vllm-(.+)\.dist-info/METADATA", n).group(1)
            for n in zf.namelist()
            if re.fullmatch(r"vllm-(.+)\.dist-info/METADATA", n)
        )
        tables = {}
        for member, names in TABLES.items():
            tables.update(evaluate_tables(zf.read(member).decode("utf-8"), names))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return {
        "version": version,
        "sha256": digest,
        "architectures": len(tables["_VLLM_MODELS"]),
        "previously_supported": len(tables["_PREVIOUSLY_SUPPORTED_MODELS"]),
        "out_of_tree": len(tables["_OOT_SUPPORTED_MODELS"]),
        "reasoning_parsers": len(tables["_REASONING_PARSERS_TO_REGISTER"]),
        "tool_parsers": len(tables["_TOOL_PARSERS_TO_REGISTER"]),
        "tokenizer_modes": len(tables["_VLLM_TOKENIZERS"]),
    }


def shipped_counts(version: str, data_dir: Path) -> dict | None:
    path = data_dir / f"vllm-{version}.json.gz"
    if not path.is_file():
        return None
    facts = json.loads(gzip.decompress(path.read_bytes()))
    registry = facts["registry"]
    return {
        "version": version,
        "sha256": facts["source"]["sha256"],
        "architectures": len(registry["architectures"]),
        "previously_supported": len(registry["previously_supported"]),
        "out_of_tree": len(registry["out_of_tree"]),
        "reasoning_parsers": len(facts["parsers"]["reasoning"]),
        "tool_parsers": len(facts["parsers"]["tool"]),
        "tokenizer_modes": len(facts["tokenizer"]["modes"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheels", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true", help="compare with the shipped facts")
    parser.add_argument("--data-dir", type=Path, default=DATA)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows, failed = [], False
    for wheel in args.wheels:
        row = count_wheel(wheel)
        if args.check:
            shipped = shipped_counts(row["version"], args.data_dir)
            matches = shipped == row
            if not matches:
                print(f"{wheel.name}: wheel {row} != shipped {shipped}", file=sys.stderr)
            row["matches_shipped_facts"] = matches
            failed |= not matches
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            check = (
                ""
                if "matches_shipped_facts" not in r
                else "  shipped facts: " + ("match" if r["matches_shipped_facts"] else "MISMATCH")
            )
            print(
                f"vllm {r['version']}: {r['architectures']} architectures, {r['previously_supported']} previously "
                f"supported, {r['out_of_tree']} out of tree, {r['reasoning_parsers']} reasoning parsers, "
                f"{r['tool_parsers']} tool parsers, {r['tokenizer_modes']} tokenizer modes{check}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
