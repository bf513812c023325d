"""One boot: put the weights on the target, run the plan's exact `vllm serve`, read its log as it is
written, wait for /health, call the after_healthy hook, stop the engine and tear down - always,
also on Ctrl-C and errors. A host fault retries on the next target; the others end the boot.

The result is a boot record (apron.records): the engine and hardware identity, the command, the
timings, every quantity parsed from the log labelled measured, and the log itself.
"""

from __future__ import annotations

import datetime as _dt
import json
import shlex
import signal
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from apron.boot.command import ServeCommand, build_command
from apron.boot.hosts import Host, LogFollower, Result
from apron.boot.probe import DOWNLOAD, IDENTITY
from apron.errors import ApronError, BadInput, HarnessFault, HostFault
from apron.frozen import frozen
from apron.measure import logparse
from apron.measure.endpoint import Endpoint
from apron.measure.loglines import read_line
from apron.plan.result import Plan
from apron.records.documents import Fault
from apron.rules.failure import classify_failure
from apron.units import shorten

Progress = Callable[[str], None]


@frozen
class BootOptions:
    vllm: str | None = None  # the vllm executable on the target
    venv: str | None = None  # or the venv that holds it
    profile: str | None = None  # None: "cpu" for a plan made for the CPU platform, else "gpu"
    extra_args: tuple[str, ...] = ()
    extra_env: dict[str, str] = field(default_factory=dict)
    log_level: str = "INFO"
    health_timeout_seconds: float = 1800.0
    workdir: str | None = None  # on the target; default ~/.cache/apron (local: Apron's cache)
    weights: str | None = None  # a local folder to use instead of the plan's source
    served_model_name: str | None = None
    keep_run_dir: bool = False
    retries: int = 2  # further attempts after a host fault
    stop_grace_seconds: float = 30.0
    hf_token: str | None = None
    # Boot a plan made for another vLLM release than the engine's (the record notes it).
    allow_engine_mismatch: bool = False
    probe_functions: tuple[str, ...] = ()  # `apron probe`: what the allocator hook wraps (boot/probing.py)


@frozen
class ServedEngine:
    """What after_healthy gets: the engine's API from this machine, and a way to run on the target
    (`vllm bench serve` runs there, next to the engine)."""

    url: str  # reachable from this machine (through an SSH tunnel for ssh targets)
    target_url: str  # the same API as seen on the target
    served_model_name: str
    vllm: str  # the vllm executable on the target
    run_dir: str
    host: Host = field(compare=False, repr=False)

    def run(self, argv: list[str], timeout: float = 600) -> Result:
        return self.host.run(" ".join(shlex.quote(a) for a in argv), timeout=timeout)


AfterHealthy = Callable[[ServedEngine], dict[str, Any]]


class EngineExited(Exception):
    def __init__(self, exit_code: int | None):
        super().__init__(f"the engine exited with status {exit_code} before /health answered")
        self.exit_code = exit_code


class Stopwatch:
    def __init__(self) -> None:
        self.marks: dict[str, float] = {}

    @contextmanager
    def time(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.marks[name] = round(time.monotonic() - start, 3)


@dataclass
class Attempt:
    """What one try on one machine gathered; turned into a record at the end."""

    target: str
    started_at: str
    identity: dict[str, Any] = field(default_factory=dict)
    command: ServeCommand | None = None
    model_path: str | None = None
    timings: Stopwatch = field(default_factory=Stopwatch)
    log_path: Path | None = None
    fault: Fault | None = None
    healthy: bool = False
    hook_result: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    probe_files: dict[str, Any] | None = None  # what the allocator hook wrote, read back before teardown


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class BootRun:
    """One attempt on one host. `execute()` never leaves an engine running."""

    def __init__(
        self,
        host: Host,
        plan: Plan,
        options: BootOptions,
        local_dir: Path,
        after_healthy: AfterHealthy | None = None,
        progress: Progress = lambda m: None,
    ):
        self.host, self.plan, self.options = host, plan, options
        self.after_healthy, self.progress = after_healthy, progress
        self.local_dir = local_dir
        self.log_path = local_dir / "engine.log"
        self.attempt = Attempt(target=host.address, started_at=now_iso(), log_path=self.log_path)
        self.run_dir = ""  # on the target, once prepared
        self.tmp_dir: str | None = None
        self.pgid: int | None = None
        self.follower: LogFollower | None = None
        self._partial = b""
        self._stage = "connect"

    # -- the sequence ----------------------------------------------------------------------------
    def execute(self) -> Attempt:
        self.local_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.write_bytes(b"")
        try:
            with _terminate_as_interrupt():
                self._boot()
        except KeyboardInterrupt:
            waiting = (
                f"stopping the engine, up to {self.options.stop_grace_seconds:.0f} s" if self.pgid else "tearing down"
            )
            self.progress(f"interrupted: {waiting}")
            raise
        except BadInput:
            raise
        except EngineExited as exc:
            self.attempt.fault = self._engine_fault("start", str(exc), exc.exit_code)
        except TimeoutError as exc:
            self.attempt.fault = self._engine_fault("health", str(exc))
        except HubUnreachable as exc:
            self.attempt.fault = Fault("host", "the Hub is not reachable from the target", exc.message, "download")
        except HostFault as exc:
            self.attempt.fault = classify_failure(self._stage, exc.message, ssh_exit_code=255)
        except Exception as exc:  # noqa: BLE001 - any other failure is recorded, never raised past teardown
            detail = exc.message if isinstance(exc, ApronError) else f"{type(exc).__name__}: {exc}"
            self.attempt.notes.append("".join(traceback.format_exception_only(type(exc), exc)).strip()[-2000:])
            self.attempt.fault = classify_failure(self._stage, detail)
        finally:
            self._teardown()
        return self.attempt

    def _boot(self) -> None:
        o = self.options
        self._stage = "prepare"
        vllm, python, workdir = self._resolve_tools()
        self.run_dir = f"{workdir}/boots/{self.local_dir.name}"
        # vLLM puts ZMQ ipc sockets in TMPDIR, and a socket path over ~107 bytes fails: a short one.
        made = self._check(
            self.host.run(f"mkdir -p {q(self.run_dir)}/cache && mktemp -d /tmp/apron.XXXXXXXX", 60), "prepare"
        )
        self.tmp_dir = made.stdout.strip().splitlines()[-1]
        self._stage = "identity"
        self.attempt.identity = self._identity(python)
        self._check_engine(vllm, python)
        self._stage = "download"
        with self.attempt.timings.time("weights_download_seconds"):
            model_path = self._weights(python, workdir)
        self.attempt.model_path = model_path
        self._stage = "launch"
        port = self._free_port(python)
        env = dict(o.extra_env)
        if o.probe_functions:
            env.update(self._install_probe())
        command = build_command(
            self.plan.command,
            vllm=vllm,
            model_path=model_path,
            port=port,
            served_model_name=self._served_name(),
            profile=o.profile or ("cpu" if self.plan.gpu_name == "cpu" else "gpu"),
            extra_args=o.extra_args,
            log_level=o.log_level,
            run_dir=self.run_dir,
            tmp_dir=self.tmp_dir,
            extra_env=env,
        )
        self.attempt.command = command
        started = time.monotonic()
        self._launch(command)
        url = self.host.forward(port)
        self._stage = "start"
        self._wait_healthy(url, started)
        self.attempt.timings.marks["engine_start_seconds"] = round(time.monotonic() - started, 3)
        self.attempt.healthy = True
        self.progress(f"healthy after {self.attempt.timings.marks['engine_start_seconds']:.1f} s")
        self._stage = "after_healthy"
        if self.after_healthy is not None:
            endpoint = ServedEngine(
                url=url,
                target_url=f"http://127.0.0.1:{port}",
                served_model_name=self._served_name(),
                vllm=vllm,
                run_dir=self.run_dir,
                host=self.host,
            )
            with self.attempt.timings.time("after_healthy_seconds"):
                self._call_hook(endpoint)

    def _call_hook(self, endpoint: ServedEngine) -> None:
        if self.after_healthy is None:
            return
        try:
            result = self.after_healthy(endpoint)
        except Exception as exc:  # noqa: BLE001 - the boot was healthy; the checks' own failure is the harness's
            self.attempt.fault = classify_failure("after_healthy", f"{type(exc).__name__}: {exc}")
            return
        self.attempt.hook_result = dict(result or {})

    # -- steps -----------------------------------------------------------------------------------
    def _resolve_tools(self) -> tuple[str, str, str]:
        return resolve_tools(self.host, self.options)

    def _identity(self, python: str) -> dict[str, Any]:
        return probe_identity(self.host, python, self.options)

    def _check_engine(self, vllm: str, python: str) -> None:
        """The engine must be a vLLM install, of the release the plan was made for."""
        version = (self.attempt.identity.get("engine") or {}).get("version")
        if not version:
            self.attempt.notes.append(
                f"the engine's release is not known ({python} has no vllm package metadata): not checked against "
                f"the plan's vLLM {self.plan.engine_version}"
            )
            return
        planned = self.plan.engine_version
        if base_version(version) == planned:
            return
        if not self.options.allow_engine_mismatch:
            raise BadInput(
                f"the plan is for vLLM {planned} but the engine at {vllm} is vLLM {version}: re-plan with "
                f"--engine vllm=={base_version(version)}, or pass --allow-engine-mismatch to boot it anyway"
            )
        note = f"engine mismatch allowed (--allow-engine-mismatch): planned for vLLM {planned}, booted vLLM {version}"
        self.attempt.notes.append(note)
        self.progress(note)

    def _weights(self, python: str, workdir: str) -> str:
        o, model = self.options, self.plan.model
        local = o.weights or (model.source if model.source_kind == "local" else None)
        if local:
            folder = Path(local)
            if not (folder / "config.json").is_file():
                raise BadInput(f"weights folder {folder} has no config.json")
            self._stage = "copy"
            if self.host.kind != "local":
                self.progress(f"copying {folder} to {self.host.address}")
            return self.host.put_dir(folder, f"{self.run_dir}/model")
        if not model.repo_id:
            raise BadInput(
                f"the plan's source {model.source} has no weights to boot (a snapshot holds headers "
                "only): plan the Hub repo or a local folder, or pass --weights DIR"
            )
        revision = model.revision
        local_dir = f"{workdir}/models/{model.repo_id.replace('/', '--')}@{revision or 'main'}"
        self.progress(f"downloading {model.repo_id}@{revision or 'main'} on {self.host.address}")
        request = json.dumps(
            {"repo_id": model.repo_id, "revision": revision, "local_dir": local_dir, "token": o.hf_token}
        ).encode()
        env = "HF_HUB_DISABLE_PROGRESS_BARS=1 "
        result = self.host.run(f"{env}{q(python)} -c {q(DOWNLOAD)}", 6 * 3600, stdin=request)
        if result.exit_code == 3:
            message, is_unreachable = download_error(result.stdout, model.repo_id, revision)
            raise HubUnreachable(message) if is_unreachable else HarnessFault(message)
        path = last_json_line(self._check(result, "download"), "download").get("path")
        if not isinstance(path, str):
            raise HarnessFault(f"download on {self.host.address} printed no path")
        return path

    def _install_probe(self) -> dict[str, str]:
        """The allocator hook as the engine's sitecustomize (boot/probing.py), and its environment."""
        from apron.boot.probing import HOOK_FOLDER, hook_source, probe_env

        folder = f"{self.run_dir}/{HOOK_FOLDER}"
        script = f"mkdir -p {q(folder)}/out && cat > {q(folder)}/sitecustomize.py"
        self._check(self.host.run(script, 60, stdin=hook_source()), "launch")
        self.attempt.probe_files = {}
        return probe_env(self.run_dir, self.options.probe_functions, self.options.extra_env)

    def _fetch_probe(self) -> None:
        from apron.boot.probing import fetch_script, parse_fetched

        result = self.host.run(fetch_script(self.run_dir), 120)
        if result.ok:
            self.attempt.probe_files = parse_fetched(result.stdout)
        else:
            self.attempt.probe_files = None
            self.attempt.notes.append(f"probe: could not read the hook's files: {result.stderr.strip()[-300:]}")

    def _free_port(self, python: str) -> int:
        code = "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
        return int(self._check(self.host.run(f"{q(python)} -c {q(code)}", 60), "launch").stdout.split()[-1])

    def _launch(self, command: ServeCommand) -> None:
        """setsid: the engine leads its own process group, so Ctrl-C here does not reach it and
        teardown can stop the whole group; the wrapper shell records the engine's exit status."""
        rd = q(self.run_dir)
        env = " ".join(f"{k}={q(v)}" for k, v in sorted(command.env.items()))
        engine = " ".join(q(a) for a in command.argv)
        inner = f"echo $$ > engine.pid; env {env} {engine}; echo $? > engine.rc"
        script = (
            f"cd {rd} && rm -f engine.pid engine.rc && : > engine.log && "
            f"(setsid sh -c {q(inner)} >> engine.log 2>&1 < /dev/null &) && "
            f"i=0; while [ ! -s engine.pid ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; cat engine.pid"
        )
        self.progress("starting: " + command.shell())
        result = self._check(self.host.run(script, 60), "launch")
        self.pgid = int(result.stdout.split()[-1])
        self.follower = self.host.follow(f"{self.run_dir}/engine.log", 0)

    def _wait_healthy(self, url: str, started: float) -> None:
        with Endpoint(url) as engine:
            self._poll_health(engine, started)

    def _poll_health(self, engine: Endpoint, started: float) -> None:
        deadline = started + self.options.health_timeout_seconds
        status_every = 0.5 if self.host.kind == "local" else 2.0
        next_status = 0.0
        while True:
            self._pump_log()
            if engine.is_healthy():
                self._pump_log()
                return
            now = time.monotonic()
            if now >= next_status:
                exit_code = self._engine_exit_code()
                if exit_code is not None:
                    raise EngineExited(exit_code if exit_code >= 0 else None)
                next_status = now + status_every
            if now > deadline:
                raise TimeoutError(
                    f"the engine did not answer /health within {self.options.health_timeout_seconds:.0f} s"
                )
            time.sleep(0.5)

    def _engine_exit_code(self) -> int | None:
        """None while the engine runs; its exit status once it has ended (-1 if unknown)."""
        script = (
            f"cd {q(self.run_dir)} && if [ -f engine.rc ]; then cat engine.rc; "
            f"elif kill -0 -{self.pgid} 2>/dev/null; then echo running; else echo gone; fi"
        )
        result = self.host.run(script, 60)
        if result.exit_code == 255 and self.host.kind == "ssh":
            raise HostFault(f"lost connection to {self.host.address}: {result.stderr.strip()[-300:]}")
        word = result.stdout.strip().split()[-1] if result.stdout.strip() else "gone"
        if word == "running":
            return None
        return int(word) if word.lstrip("-").isdigit() else -1

    def _pump_log(self) -> None:
        if self.follower is None:
            return
        error = getattr(self.follower, "error", None)  # a follower over ssh reports a lost connection
        if error:
            raise HostFault(f"{self.host.address}: {error}")
        data = self.follower.drain()
        if not data:
            return
        with open(self.log_path, "ab") as handle:
            handle.write(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for raw in lines:
            phase = engine_phase(raw.decode("utf-8", errors="replace"))
            if phase:
                self.progress(phase)

    # -- teardown --------------------------------------------------------------------------------
    def _teardown(self) -> None:
        """Stop the engine's process group, read the rest of the log, remove the run folder."""
        with self.attempt.timings.time("teardown_seconds"):
            try:
                if self.pgid is not None:
                    self._stop_engine()
                    self._finish_log()
                if self.attempt.probe_files is not None:
                    self._fetch_probe()
                if self.run_dir and not self.options.keep_run_dir:
                    self.host.run(f"rm -rf {q(self.run_dir)} {q(self.tmp_dir or '')}", 120)
            except Exception as exc:  # noqa: BLE001 - teardown must reach host.close()
                self.attempt.notes.append(f"teardown: {type(exc).__name__}: {exc}")
            finally:
                if self.follower is not None:
                    self.follower.close()
                self.host.close()

    def _stop_engine(self) -> None:
        grace_tenths = int(self.options.stop_grace_seconds * 10)
        script = (
            f"pg={self.pgid}; kill -TERM -$pg 2>/dev/null || exit 0; i=0; "
            f"while kill -0 -$pg 2>/dev/null && [ $i -lt {grace_tenths} ]; do sleep 0.1; i=$((i+1)); done; "
            f"kill -KILL -$pg 2>/dev/null; true"
        )
        for _ in range(3):  # a dropped connection must not leave an engine running
            result = self.host.run(script, self.options.stop_grace_seconds + 60)
            if result.exit_code != 255:
                return
            time.sleep(2)
        self.attempt.notes.append(f"could not reach {self.host.address} to stop engine group {self.pgid}")

    def _finish_log(self, timeout_seconds: float = 30) -> None:
        if self.follower is None:
            return
        result = self.host.run(f"wc -c < {q(self.run_dir)}/engine.log", 60)
        size = int(result.stdout.strip() or 0) if result.ok else None
        deadline = time.monotonic() + timeout_seconds
        while True:
            self._pump_log()
            if size is None or self.follower.offset >= size or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if self._partial:
            phase = engine_phase(self._partial.decode("utf-8", errors="replace"))
            if phase:
                self.progress(phase)

    # -- helpers ---------------------------------------------------------------------------------
    def _check(self, result: Result, stage: str) -> Result:
        return check_result(self.host, result, stage)

    def _engine_fault(self, stage: str, message: str, exit_code: int | None = None) -> Fault:
        if exit_code in (126, 127) and self.attempt.command is not None:
            # the shell could not run the engine at all: nothing the model did
            return Fault(
                "harness", "engine executable could not run", f"{message}: {self.attempt.command.argv[0]}", stage
            )
        self._pump_log()
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return classify_failure(stage, message, logparse.parse_log(text))

    def _served_name(self) -> str:
        return self.options.served_model_name or self.plan.served_model_name


def engine_phase(line: str) -> str | None:
    """A progress line for a log line that marks a start-up phase."""
    parsed = read_line(0, line)
    if parsed.level is None:
        return None
    for needle, label in PHASES:
        if needle in parsed.message:
            return (
                f"engine: {label}: {shorten(parsed.message, 160)}"
                if label
                else f"engine: {shorten(parsed.message, 160)}"
            )
    if parsed.level in ("ERROR", "CRITICAL") and not parsed.message.startswith((" ", "File ", "Traceback")):
        return f"engine error: {shorten(parsed.message, 200)}"
    return None


PHASES = (
    ("Initializing a V1 LLM engine", "config"),
    ("Initializing an LLM engine", "config"),
    ("Starting to load model", "loading weights"),
    ("Loading model from scratch", "loading weights"),
    ("Loading weights took", ""),
    ("Model loading took", ""),
    ("Dynamo bytecode transform time", "compiling"),
    ("torch.compile took", ""),
    ("Available KV cache memory", ""),
    ("Explicitly set (", ""),
    ("Auto set (", ""),
    ("KV cache size:", ""),
    ("Graph capturing finished", ""),
    ("init engine (profile, create kv cache, warmup model)", ""),
    ("Starting vLLM server on", "API server"),
)


class HubUnreachable(HostFault):
    """The target cannot reach the Hub: the machine's network, not the model (another target may)."""


def download_error(stdout: str, repo_id: str, revision: str | None) -> tuple[str, bool]:
    """The download's failure in the words `apron plan` uses for the same failure (apron.checkpoint),
    and whether it is the Hub that could not be reached."""
    try:
        error = json.loads(stdout.strip().splitlines()[-1])["error"]
    except (ValueError, IndexError, KeyError, TypeError):
        return f"downloading {repo_id} failed: {stdout.strip()[-300:]}", False
    from apron.checkpoint.hub_http import HubSettings, Where, to_apron_error

    where = Where(repo_id, revision)
    if error.get("type") == "ConnectError":
        import httpx2

        mapped = to_apron_error(httpx2.ConnectError(error.get("message") or ""), where, 1, HubSettings())
        if mapped is not None:
            return mapped.message, True
    return f"{where.describe()}: the download failed ({error.get('type')}: {error.get('message')})", False


def resolve_tools(host: Host, options: BootOptions) -> tuple[str, str, str]:
    """(the vllm executable, the Python beside it, the work folder) on HOST, all absolute."""
    vllm = options.vllm or (f"{options.venv.rstrip('/')}/bin/vllm" if options.venv else "")
    workdir = options.workdir or ("$HOME/.cache/apron" if host.kind != "local" else _local_workdir())
    # The engine starts in its run folder: a relative --vllm/--venv becomes absolute here first.
    # An executable whose #! interpreter is gone (a moved or deleted venv) is a broken engine.
    script = (
        f'W0={q(vllm or "vllm")}; V=$(command -v "$W0") || true; '
        f'[ -n "$V" ] && [ -x "$V" ] || {{ echo "no vllm executable (looked for $W0)" >&2; exit 127; }}; '
        f'V="$(cd "$(dirname "$V")" && pwd)/$(basename "$V")"; '
        f"I=$(head -n 1 \"$V\" | sed -n 's/^#! *\\([^ ]*\\).*/\\1/p'); "
        f'[ -z "$I" ] || [ -x "$I" ] || {{ echo "broken vllm executable $V: its interpreter $I is missing" >&2; '
        f"exit 126; }}; "
        f'P="$(dirname "$V")/python"; [ -x "$P" ] || P=$(command -v python3); '
        f'mkdir -p "{workdir}" && W=$(cd "{workdir}" && pwd) && printf "%s\\n%s\\n%s\\n" "$V" "$P" "$W"'
    )
    result = check_result(host, host.run(script, 60), "prepare")
    vllm_path, python, resolved = result.stdout.strip().splitlines()[-3:]
    return vllm_path, python, resolved


def probe_identity(host: Host, python: str, options: BootOptions) -> dict[str, Any]:
    """The engine and hardware identity (apron.boot.probe.IDENTITY) as the engine's Python sees it."""
    # The engine's --env values reach the probe too: APRON_IMAGE_DIGEST names a container image.
    env = " ".join(f"{k}={q(v)}" for k, v in sorted(options.extra_env.items()))
    script = f"env {env} {q(python)} -" if env else f"{q(python)} -"
    result = check_result(host, host.run(script, 120, stdin=IDENTITY.encode()), "identity")
    return last_json_line(result, "identity")


def last_json_line(result: Result, stage: str) -> dict[str, Any]:
    """The JSON object a helper script prints last on stdout (apron.boot.probe)."""
    lines = result.stdout.strip().splitlines()
    try:
        document = json.loads(lines[-1]) if lines else None
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise HarnessFault(f"{stage} printed no JSON object last: {shorten(result.stdout.strip(), 300)!r}")
    return document


def check_result(host: Host, result: Result, stage: str) -> Result:
    if result.ok:
        return result
    message = (result.stderr.strip() or result.stdout.strip())[-1500:] or f"exit status {result.exit_code}"
    if result.exit_code == 255 and host.kind == "ssh":
        raise HostFault(f"{host.address}: {message}")
    raise HarnessFault(f"{stage} on {host.address} failed: {message}")


def base_version(version: str) -> str:
    """ "0.32.0+cpu" -> "0.32.0": the release, without the build's local label."""
    return version.split("+", 1)[0]


def q(text: str) -> str:
    """Quote for sh, but let a leading $HOME expand on the target."""
    if text.startswith("$HOME/"):
        return '"$HOME"/' + shlex.quote(text[len("$HOME/") :])
    return shlex.quote(text)


def _local_workdir() -> str:
    from apron.paths import cache_dir

    return str(cache_dir())


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI timeout, `kill`) tears down like Ctrl-C does."""

    def handler(signum: int, frame: FrameType | None) -> NoReturn:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def new_run_name() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]
