"""Talking to a served engine (an OpenAI-compatible endpoint): fetch raw response bodies, time them,
keep errors as data. The one HTTP client for every call Apron makes to a served model.

Fetching is kept apart from scoring: a check scores the raw JSON body the server sent, so the same
scoring code runs on live replies and on recorded ones (tests/fixtures/responses/).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from apron.errors import BadInput, Failed
from apron.frozen import frozen


@frozen
class Reply:
    """One HTTP exchange: the status, the parsed body (or the error text) and the wall time."""

    status_code: int  # 0 when no HTTP answer came back (timeout)
    body: dict[str, Any]
    latency_seconds: float
    error: str | None = None  # set for non-2xx answers and timeouts

    @property
    def is_ok(self) -> bool:
        return self.error is None and 200 <= self.status_code < 300


@frozen
class ServedModel:
    """A model as /v1/models lists it (vLLM adds `root` and `max_model_len`)."""

    name: str
    root: str | None
    max_model_len_tokens: int | None


def reply_from_record(status_code: int, body: dict[str, Any], latency_seconds: float = 0.0) -> Reply:
    """A Reply rebuilt from a recorded exchange (tests/fixtures/responses/)."""
    ok = 200 <= status_code < 300
    return Reply(status_code, body, latency_seconds, None if ok else error_message(body, f"HTTP {status_code}"))


def api_base(url: str) -> str:
    """The OpenAI base URL (…/v1) for a server root or an /v1 URL."""
    url = url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


def server_root(url: str) -> str:
    """vLLM serves /tokenize beside /v1, not under it."""
    base = api_base(url)
    return base[: -len("/v1")]


def error_message(body: dict[str, Any], fallback: str) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return fallback


class Endpoint:
    """An OpenAI-compatible server (and the model under test): every call Apron makes to a served
    engine goes through here (health, models, chat, tokenize). httpx2 is imported on first use."""

    def __init__(self, url: str, model: str = "", *, api_key: str | None = None, timeout_seconds: float = 600):
        if not url.startswith(("http://", "https://")):
            raise BadInput(f"URL {url!r} is not an http(s) URL: give the server's address, e.g. http://127.0.0.1:8000")
        import httpx2

        self.url, self.model, self.timeout_seconds = url.rstrip("/"), model, timeout_seconds
        self._http = httpx2
        # No retries: a check measures the first answer, and a retried request would hide a crash.
        self.client = httpx2.Client(
            timeout=timeout_seconds,
            headers={"Authorization": f"Bearer {api_key or os.environ.get('OPENAI_API_KEY') or 'EMPTY'}"},
        )

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def is_healthy(self, timeout_seconds: float = 3) -> bool:
        """GET /health answered 200 (anything else, a refused connection included, is not healthy)."""
        try:
            return self.client.get(server_root(self.url) + "/health", timeout=timeout_seconds).status_code == 200
        except (self._http.HTTPError, OSError, ValueError):
            return False

    def post(self, path: str, body: dict[str, Any]) -> Reply:
        """POST a JSON body; path is relative to /v1 ('/chat/completions') or absolute."""
        started = time.monotonic()
        try:
            response = self.client.post(self._url(path), json=body)
        except self._http.TimeoutException:
            return Reply(0, {}, time.monotonic() - started, f"no answer within {self.timeout_seconds} s")
        except self._http.HTTPError as exc:
            raise Failed(f"cannot reach {self.url}: {exc}; is the server running?") from exc
        elapsed = time.monotonic() - started
        parsed, is_object = _decode(response.text)
        if not response.is_success:
            return Reply(response.status_code, parsed, elapsed, error_message(parsed, response.text[:300]))
        if not is_object:
            return Reply(response.status_code, parsed, elapsed, "the answer is not a JSON object")
        return Reply(response.status_code, parsed, elapsed)

    def chat(self, body: dict[str, Any]) -> Reply:
        return self.post("/chat/completions", {"model": self.model, **body})

    def served_models(self) -> list[ServedModel]:
        try:
            response = self.client.get(self._url("/models"))
        except self._http.HTTPError as exc:
            raise Failed(f"cannot reach {self.url}: {exc}; is the server running?") from exc
        if not response.is_success:
            raise Failed(f"{self.url}/v1/models answered HTTP {response.status_code}: {response.text[:200]}")
        return [
            ServedModel(str(m.get("id")), m.get("root"), m.get("max_model_len"))
            for m in _decode(response.text)[0].get("data", [])
            if isinstance(m, dict)
        ]

    def served_model(self) -> ServedModel:
        models = self.served_models()
        for model in models:
            if model.name == self.model:
                return model
        names = ", ".join(m.name for m in models) or "nothing"
        raise BadInput(
            f"model {self.model!r} is not served at {self.url}: it serves {names}; pass --model with one of them"
        )

    def count_tokens(self, messages: list[dict[str, Any]]) -> int | None:
        """Prompt tokens of a chat request as the server's own tokenizer and template count them
        (vLLM's /tokenize); None where the server has no such endpoint."""
        reply = self.post(
            server_root(self.url) + "/tokenize",
            {"model": self.model, "messages": messages, "add_generation_prompt": True},
        )
        count = reply.body.get("count") if reply.is_ok else None
        return count if isinstance(count, int) else None

    def _url(self, path: str) -> str:
        return path if path.startswith(("http://", "https://")) else api_base(self.url) + path


def _decode(text: str) -> tuple[dict[str, Any], bool]:
    """The body as a dict, and whether it was a JSON object (anything else is kept under "raw")."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return {"raw": text[:2000]}, False
    return (parsed, True) if isinstance(parsed, dict) else ({"raw": parsed}, False)
