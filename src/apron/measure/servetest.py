"""The serving test: vLLM's own `vllm bench serve` against a served model, its result JSON parsed.

50 requests of 512 random tokens in and 128 out, 4 at a time, by default. vLLM's load generator
runs as a subprocess (no vllm import here); its output is read line by line as it comes and its
result file is parsed by the keys the real tool writes (tests/fixtures/servetest/).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from apron.errors import BadInput, Failed
from apron.frozen import frozen
from apron.measure.endpoint import Endpoint, server_root

# Percentile keys `vllm bench serve` writes for --percentile-metrics ttft,tpot,itl,e2el
# --metric-percentiles 50,90,99: "p50_ttft_ms", ..., plus mean_/median_/std_ per metric.
METRICS = ("ttft", "tpot", "itl", "e2el")
PERCENTILES = (50, 90, 99)


@frozen
class ServeTestSettings:
    num_prompts: int = 50
    input_len_tokens: int = 512
    output_len_tokens: int = 128
    concurrency: int = 4
    seed: int = 0

    def validate(self) -> ServeTestSettings:
        for name in ("num_prompts", "input_len_tokens", "output_len_tokens", "concurrency"):
            if getattr(self, name) < 1:
                raise BadInput(
                    f"--{name.replace('_tokens', '').replace('_', '-')} must be at least 1, not {getattr(self, name)}"
                )
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "num_prompts": self.num_prompts,
            "input_len_tokens": self.input_len_tokens,
            "output_len_tokens": self.output_len_tokens,
            "concurrency": self.concurrency,
            "seed": self.seed,
        }


@frozen
class Latency:
    """One latency metric in seconds (vLLM reports milliseconds)."""

    mean_seconds: float
    p50_seconds: float
    p90_seconds: float
    p99_seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            k: round(v, 6)
            for k, v in (
                ("mean_seconds", self.mean_seconds),
                ("p50_seconds", self.p50_seconds),
                ("p90_seconds", self.p90_seconds),
                ("p99_seconds", self.p99_seconds),
            )
        }


@frozen
class ServeFigures:
    """What a `vllm bench serve` result file says, in Apron's units."""

    completed: int
    failed: int
    duration_seconds: float
    total_input_tokens: int
    total_output_tokens: int
    request_throughput_per_second: float
    output_tokens_per_second: float
    ttft: Latency
    tpot: Latency
    itl: Latency
    e2el: Latency

    @property
    def output_tokens_per_second_per_user(self) -> float | None:
        """A user's decode speed: one over the median time per output token."""
        return 1.0 / self.tpot.p50_seconds if self.tpot.p50_seconds > 0 else None

    def p99_note(self) -> str:
        # TTFT and TPOT percentiles are taken over requests; with fewer than 100 of them the p99 is
        # interpolated between the slowest two, so it describes one or two requests, not a tail.
        if self.completed < 100:
            return f"p99 over {self.completed} requests is the slowest one or two of them: read it beside p50"
        return f"p99 over {self.completed} requests"

    def to_json(self) -> dict[str, Any]:
        return {
            "completed": self.completed,
            "failed": self.failed,
            "duration_seconds": round(self.duration_seconds, 4),
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
            "request_throughput_per_second": round(self.request_throughput_per_second, 6),
            "output_tokens_per_second": round(self.output_tokens_per_second, 4),
            "output_tokens_per_second_per_user": _round(self.output_tokens_per_second_per_user, 4),
            "ttft": self.ttft.to_json(),
            "tpot": self.tpot.to_json(),
            "itl": self.itl.to_json(),
            "e2el": self.e2el.to_json(),
            "p99_note": self.p99_note(),
        }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


@frozen
class ServeReport:
    url: str
    model: str
    settings: ServeTestSettings
    figures: ServeFigures
    result_path: str
    command: tuple[str, ...]

    first_error: str | None = None  # the first failed request's error, from the tool's log

    @property
    def expected_output_tokens(self) -> int:
        return self.figures.completed * self.settings.output_len_tokens

    @property
    def verdict(self) -> str:
        """served: every request completed, each with all its output tokens (the bench ignores EOS,
        so fewer tokens means the server cut requests short)."""
        f = self.figures
        ok = (
            f.failed == 0
            and f.completed == self.settings.num_prompts
            and f.total_output_tokens >= self.expected_output_tokens
        )
        return "served" if ok else "not_served"

    @property
    def reason(self) -> str:
        f = self.figures
        if f.failed or f.completed < self.settings.num_prompts:
            error = f": {self.first_error}" if self.first_error else ""
            return f"{f.failed} of {self.settings.num_prompts} requests failed ({f.completed} completed){error}"
        if f.total_output_tokens < self.expected_output_tokens:
            return (
                f"requests came back short: {f.total_output_tokens} of {self.expected_output_tokens} output "
                "tokens; the server stopped them early (does input + output exceed the served max_model_len?)"
            )
        return f"all {f.completed} requests completed"

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "apron.serve_test/1",
            "url": self.url,
            "model": self.model,
            "verdict": self.verdict,
            "reason": self.reason,
            "first_error": self.first_error,
            "settings": self.settings.to_json(),
            "figures": self.figures.to_json(),
            "tool": "vllm bench serve",
            "result_path": self.result_path,
            "command": list(self.command),
        }


# ---- the result file ----------------------------------------------------------------------------


def _number(document: dict[str, Any], key: str) -> float:
    value = document.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise Failed(
            f"the vllm bench serve result has no number under {key!r}: was it run with "
            "--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99?"
        )
    return float(value)


def _latency(document: dict[str, Any], metric: str) -> Latency:
    def seconds(key: str) -> float:
        return _number(document, key) / 1000.0

    return Latency(
        seconds(f"mean_{metric}_ms"),
        seconds(f"p50_{metric}_ms"),
        seconds(f"p90_{metric}_ms"),
        seconds(f"p99_{metric}_ms"),
    )


def parse_bench_result(document: dict[str, Any]) -> ServeFigures:
    """The figures of one `vllm bench serve --save-result` JSON document."""
    if not isinstance(document, dict):
        raise Failed("the vllm bench serve result is not a JSON object")
    return ServeFigures(
        completed=int(_number(document, "completed")),
        failed=int(_number(document, "failed")),
        duration_seconds=_number(document, "duration"),
        total_input_tokens=int(_number(document, "total_input_tokens")),
        total_output_tokens=int(_number(document, "total_output_tokens")),
        request_throughput_per_second=_number(document, "request_throughput"),
        output_tokens_per_second=_number(document, "output_throughput"),
        **{metric: _latency(document, metric) for metric in METRICS},
    )


def read_bench_result(path: Path) -> ServeFigures:
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise Failed(f"vllm bench serve wrote no result file at {path}") from exc
    except ValueError as exc:
        raise Failed(f"the vllm bench serve result {path} is not JSON: {exc}") from exc
    return parse_bench_result(document)


# ---- running vllm bench serve -------------------------------------------------------------------


def resolve_vllm(vllm_executable: str | os.PathLike[str] | None) -> str:
    """The `vllm` to run: the one given (bad input if missing) or the one on PATH (failure if none)."""
    if vllm_executable is None:
        found = shutil.which("vllm")
        if found is None:
            raise Failed("vLLM is not installed here (no `vllm` on PATH): install vllm or pass --vllm PATH")
        return found
    given = str(vllm_executable)
    found = (
        shutil.which(given)
        if os.sep not in given
        else (given if os.access(given, os.X_OK) and os.path.isfile(given) else None)
    )
    if found is None:
        raise BadInput(f"--vllm {given}: no such executable; give the path of the `vllm` command")
    return found


def bench_command(
    vllm: str, url: str, model: str, tokenizer: str, settings: ServeTestSettings, result_dir: Path, result_filename: str
) -> list[str]:
    return [
        vllm,
        "bench",
        "serve",
        "--backend",
        "openai",
        "--base-url",
        server_root(url),
        "--endpoint",
        "/v1/completions",
        "--model",
        model,
        "--tokenizer",
        tokenizer,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(settings.input_len_tokens),
        "--random-output-len",
        str(settings.output_len_tokens),
        "--random-range-ratio",
        "0",
        "--num-prompts",
        str(settings.num_prompts),
        "--max-concurrency",
        str(settings.concurrency),
        "--seed",
        str(settings.seed),
        "--ignore-eos",
        "--percentile-metrics",
        ",".join(METRICS),
        "--metric-percentiles",
        ",".join(map(str, PERCENTILES)),
        "--save-result",
        "--result-dir",
        str(result_dir),
        "--result-filename",
        result_filename,
        "--disable-tqdm",
    ]


def _default_tokenizer(url: str, model: str, api_key: str | None) -> str:
    """The served model's source as /v1/models names it (vLLM's `root`): the tokenizer the server uses."""
    served = Endpoint(url, model, api_key=api_key, timeout_seconds=30).served_model()
    return served.root or model


def _pump(process: subprocess.Popen[str], log: IO[str], progress: Callable[[str], None] | None) -> None:
    """Read the tool's output as it comes (a full pipe would stall it), into the log and to progress."""
    for line in process.stdout or ():
        log.write(line)
        log.flush()
        if progress is not None and line.strip():
            progress(line.rstrip())


def _stop(process: subprocess.Popen[str]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
            process.wait(10)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def run_bench(
    command: list[str],
    log_path: Path,
    timeout_seconds: float,
    progress: Callable[[str], None] | None,
    env: dict[str, str] | None = None,
) -> None:
    """Run the tool in its own process group; stop the whole group if it outlives the timeout."""
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
        reader = threading.Thread(target=_pump, args=(process, log, progress), daemon=True)
        reader.start()
        try:
            process.wait(timeout_seconds)
        except subprocess.TimeoutExpired:
            _stop(process)
            raise Failed(
                f"vllm bench serve ran past {timeout_seconds:.0f} s and was stopped; log: {log_path}"
            ) from None
        finally:
            reader.join(10)
    if process.returncode != 0:
        raise Failed(f"vllm bench serve failed (exit {process.returncode}): {_last_line(log_path)}; log: {log_path}")


def first_request_error(log_text: str) -> str | None:
    """vLLM's bench lists failed requests as 'Error 0: Bad Request' after its run."""
    match = re.search(r"^Error 0: (.+)$", log_text, re.MULTILINE)
    return match.group(1).strip()[:300] if match else None


def _last_line(log_path: Path) -> str:
    lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def default_result_dir() -> Path:
    from apron.paths import data_dir

    return data_dir() / "serve-tests"


def run_serve_test(
    base_url: str,
    model: str,
    *,
    vllm_executable: str | os.PathLike[str] | None,
    num_prompts: int = 50,
    input_len: int = 512,
    output_len: int = 128,
    concurrency: int = 4,
    seed: int = 0,
    tokenizer: str | None = None,
    result_dir: str | os.PathLike[str] | None = None,
    timeout_seconds: float = 1800,
    api_key: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> ServeReport:
    """Run `vllm bench serve` against URL and parse its result. `tokenizer` defaults to the served
    model's root (a local path or Hub id the bench loads to build prompts of exact token counts)."""
    settings = ServeTestSettings(num_prompts, input_len, output_len, concurrency, seed).validate()
    vllm = resolve_vllm(vllm_executable)
    tokenizer = tokenizer or _default_tokenizer(base_url, model, api_key)
    out_dir = Path(result_dir) if result_dir is not None else default_result_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    filename = f"serve-test-{stamp}.json"
    command = bench_command(vllm, base_url, model, tokenizer, settings, out_dir, filename)
    if progress is not None:
        progress(
            f"serve test: {settings.num_prompts} requests, {settings.input_len_tokens} tokens in, "
            f"{settings.output_len_tokens} out, {settings.concurrency} at a time (vllm bench serve)"
        )
    # vLLM's bench sends OPENAI_API_KEY as the bearer token.
    env = {**os.environ, "OPENAI_API_KEY": api_key} if api_key else None
    log_path = out_dir / f"serve-test-{stamp}.log"
    run_bench(command, log_path, timeout_seconds, progress, env)
    figures = read_bench_result(out_dir / filename)
    return ServeReport(
        base_url,
        model,
        settings,
        figures,
        str(out_dir / filename),
        tuple(command),
        first_request_error(log_path.read_text(errors="replace")),
    )
