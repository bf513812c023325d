"""Write what a vLLM release's `vllm serve` accepts: every option of its own argument parser (the
option strings, the field each sets, how many words it takes) and every environment variable its
envs.py reads. Apron's deployment readers (src/apron/deploy) use the table to split a command line
the way that release's parser does and to name the flags and variables it would refuse or ignore.

Run it with the python of a vLLM venv (any platform build: the option names and their arity do not
depend on the platform), once per release, the release's source first on PYTHONPATH:

    PYTHONPATH=/path/to/vllm-0.33.0 .venv-vllm/bin/python scripts/serve_options.py \
        src/apron/deploy/data/serve-options.json.gz

It adds (or replaces) the release it imports in the table and keeps the others.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any


def parser() -> argparse.ArgumentParser:
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    try:  # 0.33 moved the serve parser
        from vllm.entrypoints.common.cli_args import make_arg_parser
    except ImportError:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
    return make_arg_parser(FlexibleArgumentParser())


def nargs(action: argparse.Action) -> int | str:
    """0 (a switch, with what it sets), 1 (one value), or argparse's '?', '+', '*'."""
    if action.nargs is None:
        return 1
    if isinstance(action.nargs, int):
        return action.nargs
    return str(action.nargs)


def switch_value(built: argparse.ArgumentParser, action: argparse.Action, text: str) -> Any:
    """What a switch sets its field to, by running the action as argparse would."""
    namespace = argparse.Namespace(**{action.dest: action.default})
    action(built, namespace, None if not action.nargs else [], option_string=text)
    value = getattr(namespace, action.dest)
    return value if isinstance(value, (bool, int, float, str)) or value is None else repr(value)


def release_table() -> tuple[str, dict[str, Any]]:
    import vllm
    import vllm.envs

    built = parser()
    options = {}
    # argparse resolves option strings through this map, hidden aliases included (0.33's
    # EnableDisableAction keeps --no-enable-x registered but out of help and option_strings).
    for text, action in built._option_string_actions.items():
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        entry: dict[str, Any] = {"dest": action.dest, "nargs": nargs(action)}
        if entry["nargs"] == 0:
            entry["sets"] = switch_value(built, action, text)
            # the field's parser default: a switch that sets it changes nothing (None: resolved later)
            entry["default"] = action.default if isinstance(action.default, (bool, int, float, str)) else None
        options[text] = entry
    env = sorted(vllm.envs.environment_variables)
    return vllm.__version__.split("+")[0], {"options": dict(sorted(options.items())), "env": env}


def main(out: str) -> None:
    path = Path(out)
    table = json.loads(gzip.decompress(path.read_bytes())) if path.exists() else {"releases": {}}
    version, entry = release_table()
    table["releases"][version] = entry
    table["releases"] = dict(sorted(table["releases"].items()))
    table["about"] = (
        "vllm serve's options and the environment variables envs.py reads, per release, from each "
        "release's own parser (scripts/serve_options.py)"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(json.dumps(table, indent=None, sort_keys=True).encode(), mtime=0))
    print(f"{version}: {len(entry['options'])} option strings, {len(entry['env'])} environment variables")


if __name__ == "__main__":
    main(sys.argv[1])
