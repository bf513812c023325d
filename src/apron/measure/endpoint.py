"""Talking to an OpenAI-compatible endpoint: fetch raw response bodies, time them, keep errors as data.

Fetching is kept apart from scoring: a check scores the raw JSON body the server sent, so the same
scoring code runs on live replies and on recorded ones (tests/fixtures/responses/).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

import openai

from apron.errors import BadInput, Failed


@dataclass(frozen=True)
class Reply:
    """One HTTP exchange: the status, the parsed body (or the error text) and the wall time."""

    status_code: int  # 0 when no HTTP answer came back (timeout)
    body: dict
    latency_seconds: float
    error: str | None = None  # set for non-2xx answers and timeouts

    @property
    def is_ok(self) -> bool:
        return self.error is None and 200 <= self.status_code < 300


@dataclass(frozen=True)
class ServedModel:
    """A model as /v1/models lists it (vLLM adds `root` and `max_model_len`)."""

    name: str
    root: str | None
    max_model_len_tokens: int | None


def reply_from_record(status_code: int, body: dict, latency_seconds: float = 0.0) -> Reply:
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


def error_message(body: dict, fallback: str) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return fallback


class Endpoint:
    """An OpenAI-compatible server and the model under test."""

    def __init__(self, url: str, model: str, *, api_key: str | None = None, timeout_seconds: float = 600):
        if not url.startswith(("http://", "https://")):
            raise BadInput(f"URL {url!r} is not an http(s) URL: give the server's address, e.g. http://127.0.0.1:8000")
        self.url, self.model = url.rstrip("/"), model
        # No retries: a check measures the first answer, and a retried request would hide a crash.
        self.client = openai.OpenAI(
            base_url=api_base(url),
            max_retries=0,
            timeout=timeout_seconds,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
        )

    def post(self, path: str, body: dict) -> Reply:
        """POST a JSON body; path is relative to /v1 ('/chat/completions') or absolute."""
        started = time.monotonic()
        try:
            answer = self.client.post(path, body=body, cast_to=object)
        except openai.APIStatusError as exc:
            elapsed = time.monotonic() - started
            parsed = _parse_body(exc.response.text)
            return Reply(exc.status_code, parsed, elapsed, error_message(parsed, exc.response.text[:300]))
        except openai.APITimeoutError:
            elapsed = time.monotonic() - started
            return Reply(0, {}, elapsed, f"no answer within {self.client.timeout} s")
        except openai.APIConnectionError as exc:
            raise Failed(f"cannot reach {self.url}: {exc.__cause__ or exc}; is the server running?") from exc
        elapsed = time.monotonic() - started
        if not isinstance(answer, dict):
            return Reply(200, {"raw": answer}, elapsed, "the answer is not a JSON object")
        return Reply(200, answer, elapsed)

    def chat(self, body: dict) -> Reply:
        return self.post("/chat/completions", {"model": self.model, **body})

    def served_models(self) -> list[ServedModel]:
        try:
            document = self.client.get("/models", cast_to=object)
        except openai.APIConnectionError as exc:
            raise Failed(f"cannot reach {self.url}: {exc.__cause__ or exc}; is the server running?") from exc
        except openai.APIStatusError as exc:
            raise Failed(f"{self.url}/v1/models answered HTTP {exc.status_code}: {exc.response.text[:200]}") from exc
        return [
            ServedModel(str(m.get("id")), m.get("root"), m.get("max_model_len"))
            for m in (document or {}).get("data", [])
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

    def count_tokens(self, messages: list[dict]) -> int | None:
        """Prompt tokens of a chat request as the server's own tokenizer and template count them
        (vLLM's /tokenize); None where the server has no such endpoint."""
        reply = self.post(
            server_root(self.url) + "/tokenize",
            {"model": self.model, "messages": messages, "add_generation_prompt": True},
        )
        count = reply.body.get("count") if reply.is_ok else None
        return count if isinstance(count, int) else None


def _parse_body(text: str) -> dict:
    try:
        parsed = json.loads(text)
    except ValueError:
        return {"raw": text[:2000]}
    return parsed if isinstance(parsed, dict) else {"raw": parsed}
