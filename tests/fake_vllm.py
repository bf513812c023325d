"""A stand-in `vllm serve` for the runner's own plumbing tests (log volume, retries, Ctrl-C), where a
real engine would add a minute per case without testing anything more: it prints the real CPU
engine's start-up log (tests/fixtures/logs), padded to FAKE_VLLM_LOG_MB megabytes, then answers
/health on --port, and any chat completion with a reply the real engine gave (tests/fixtures/responses).
FAKE_VLLM_MODE=fail prints a real refusal and exits 1; hang never answers.
The real engine is booted by tests/test_boot.py's engine tests."""

from __future__ import annotations

import http.server
import json
import os
import sys
import time
from pathlib import Path

LOGS = Path(__file__).parent / "fixtures" / "logs"
REPLY = Path(__file__).parent / "fixtures" / "responses" / "arithmetic_wrong.json"


def main() -> int:
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    mode = os.environ.get("FAKE_VLLM_MODE", "serve")
    out = sys.stdout.buffer
    if mode == "fail":
        out.write((LOGS / "d_kv_too_small_fast_1048575.log").read_bytes())
        out.flush()
        return 1
    healthy = (LOGS / "a_healthy_fast_uni.log").read_bytes()
    head, tail = healthy.split(b"INFO:     Started server process", 1)
    out.write(head)
    filler = b"(EngineCore pid=8014) DEBUG 11-30 07:56:41 [fake.py:1] " + b"x" * 140 + b"\n"
    for _ in range(int(float(os.environ.get("FAKE_VLLM_LOG_MB", "0")) * 2**20) // len(filler)):
        out.write(filler)
    out.write(
        b"(EngineCore pid=8014) INFO 11-30 07:56:42 [cpu_worker.py:260] Explicitly set (0.06/10.96) GiB "
        b"for KV cache on node 0.\n"
    )
    out.flush()
    if mode == "hang":
        time.sleep(3600)

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != "/v1/chat/completions":
                self.send_response(404)
                self.end_headers()
                return
            body = json.dumps(json.loads(REPLY.read_text())["body"]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = http.server.HTTPServer(("127.0.0.1", port), Health)
    out.write(b"INFO:     Started server process [1]\nINFO:     Application startup complete.\n")
    out.flush()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
