#!/usr/bin/env python3
"""Time `apron plan org/name` against a Hub that accepts the connection and never answers (target:
one line on stderr within 30 s, with the default timeouts).

    python benchmarks/hub_silent.py

Prints one JSON object: the wall seconds from start to exit, the exit code, the stderr lines, and
how many connections the silent server accepted.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def main() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("APRON_HUB_", "HF_"))}
        env |= {"HF_ENDPOINT": f"http://127.0.0.1:{server.getsockname()[1]}", "HF_HOME": f"{home}/hf"}
        env |= {"APRON_HOME": f"{home}/apron", "PYTHONPATH": str(SRC)}
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "apron.cli", "plan", "someorg/somemodel", "--gpu", "H100"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        wall = time.monotonic() - started
    server.close()
    lines = done.stderr.strip().splitlines()
    print(
        json.dumps(
            {
                "wall_seconds": round(wall, 1),
                "exit_code": done.returncode,
                "stderr": lines,
                "connections": len(held),
                "target_seconds": 30,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
