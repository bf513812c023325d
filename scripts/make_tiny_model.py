#!/usr/bin/env python3
"""Build a tiny random-weight checkpoint for the tests: `apron example tiny` with the test variants' knobs.

Runs with Apron's own Python (standard library only; apron.checkpoint.example). The defaults are the
suite's small model (2 layers, a 2,048-token context); --deep gives 8 layers and 32,768 tokens.

    python scripts/make_tiny_model.py OUT_DIR [--tools] [--think] [--deep] [--arch llama|qwen3|gemma2|mamba|idefics3]
        [--architectures NAME] [--layers N] [--max-pos N] [--model-max-length N] [--dtype bfloat16] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from apron.checkpoint.example import FAMILIES, TinySpec, write_tiny_model


def spec_from_args(argv: list[str]) -> tuple[Path, TinySpec]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--tools", action="store_true", help="Hermes-style tools chat template + <tool_call> tokens")
    ap.add_argument("--think", action="store_true", help="<think>/</think> tokens for vLLM's reasoning parsers")
    ap.add_argument("--deep", action="store_true", help="defaults --layers 8 --max-pos 32768")
    ap.add_argument("--arch", default="llama", choices=sorted(FAMILIES))
    ap.add_argument("--architectures", default=None, help="write this architecture name instead (e.g. a fake one)")
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--max-pos", type=int, default=None)
    ap.add_argument("--model-max-length", type=int, default=None)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    spec = TinySpec(
        family=args.arch,
        num_layers=args.layers or (8 if args.deep else 2),
        max_positions=args.max_pos or (32768 if args.deep else 2048),
        model_max_length=args.model_max_length,
        dtype=args.dtype,
        seed=args.seed,
        tools=args.tools,
        think=args.think,
        architectures=args.architectures,
    )
    return Path(args.out_dir), spec


def main(argv: list[str] | None = None) -> int:
    folder, spec = spec_from_args(sys.argv[1:] if argv is None else argv)
    print(json.dumps(write_tiny_model(folder, spec).to_json(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
