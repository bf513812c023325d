"""The real vLLM CPU engine boots with a tiny local model and answers (the basis of the boot tests)."""

from __future__ import annotations

from engine_env import post_json


def test_engine_answers_chat(cpu_engine):
    status, body = post_json(
        cpu_engine.url + "/v1/chat/completions",
        {
            "model": "tiny",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 8,
            "temperature": 0,
            "ignore_eos": True,
        },
    )
    assert status == 200
    assert body["usage"]["completion_tokens"] == 8
    assert "CPU KV cache size:" in cpu_engine.log_text()
