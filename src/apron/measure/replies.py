"""Reading a chat completion body: the answer channel, the reasoning channel, tool calls, and signs
that reasoning or a tool call came back in the wrong place."""

from __future__ import annotations

import json
from typing import Any

from apron.frozen import frozen

# Tags that mean reasoning text reached the answer channel unparsed: <think> families (Qwen3,
# DeepSeek-R1, GLM), Seed-OSS, Kimi, Magistral, and gpt-oss harmony channels.
REASONING_MARKERS = (
    "<think>",
    "</think>",
    "<seed:think>",
    "</seed:think>",
    "◁think▷",
    "◁/think▷",
    "[THINK]",
    "[/THINK]",
    "<|channel|>analysis",
    "<|start|>assistant<|channel|>",
)
# Tool-call markup that a tool parser should have turned into `tool_calls`: Hermes/Qwen, Mistral,
# Llama 3, Qwen3-Coder/XML, DeepSeek, Kimi, gpt-oss.
TOOL_CALL_MARKERS = (
    "<tool_call>",
    "[TOOL_CALLS]",
    "<|python_tag|>",
    "<function=",
    "<｜tool▁calls▁begin｜>",
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "to=functions.",
)

EXCERPT_CHARS = 400


@frozen
class ChatAnswer:
    """The first choice of a chat completion, split into the parts the checks look at."""

    content: str
    reasoning: str
    tool_calls: tuple[dict[str, Any], ...]
    finish_reason: str | None
    completion_tokens: int | None


def read_answer(body: dict[str, Any]) -> ChatAnswer | None:
    """None where the body is not a chat completion (no choices)."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message") or {}
    # vLLM < 0.11 and some servers name the reasoning field reasoning_content.
    reasoning = message.get("reasoning") or message.get("reasoning_content") or ""
    usage = body.get("usage") or {}
    return ChatAnswer(
        content=message.get("content") or "",
        reasoning=reasoning,
        tool_calls=tuple(message.get("tool_calls") or ()),
        finish_reason=choices[0].get("finish_reason"),
        completion_tokens=usage.get("completion_tokens"),
    )


def reasoning_marker_in(text: str) -> str | None:
    return next((m for m in REASONING_MARKERS if m in text), None)


def tool_call_marker_in(text: str) -> str | None:
    return next((m for m in TOOL_CALL_MARKERS if m in text), None)


def excerpt(body: dict[str, Any]) -> str:
    """A short view of what the server sent: the message fields that matter, or the error."""
    answer = read_answer(body)
    if answer is None:
        shown: object = body
    else:
        shown = {
            k: v
            for k, v in (
                ("content", answer.content or None),
                ("reasoning", answer.reasoning or None),
                ("tool_calls", list(answer.tool_calls) or None),
                ("finish_reason", answer.finish_reason),
            )
            if v is not None
        }
    text = json.dumps(shown, ensure_ascii=False)
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


def clip(text: str, limit: int = 80) -> str:
    """A quoted piece of model text for a one-line reason."""
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return json.dumps(text, ensure_ascii=False)


def shown(text: str) -> str:
    """Model text for a reason; a run of whitespace is named as such (random weights emit pages of it)."""
    return clip(text) if text.strip() else f"only whitespace {clip(text, 12)}"
