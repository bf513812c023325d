"""The reasoning parser, tool-call parser and tokenizer mode a model needs to answer properly.

Without `--reasoning-parser` a thinking model's reasoning lands in the answer; without
`--enable-auto-tool-choice --tool-call-parser` tool calls come back as text. The parser names come
from the model family (and, where the checkpoint ships one, the chat template), and are emitted only
when the pinned release registers them (its facts file's parser registries).
"""

from __future__ import annotations

from apron.checkpoint import Checkpoint
from apron.engine.facts import EngineFacts
from apron.frozen import frozen
from apron.plan.quantity import Problem

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Literal


@frozen
class FamilyParsers:
    reasoning: str | None
    tool: str | None
    why: str


# (match, parsers): the first rule whose test holds wins. Names are vLLM's registry keys; each rule
# follows the family's published vLLM serving instructions.
def _rules(checkpoint: Checkpoint) -> list[tuple[bool, FamilyParsers]]:
    model_type = checkpoint.model_type
    text_type = (checkpoint.config.get("text_config") or {}).get("model_type", model_type)
    name = (checkpoint.repo_id or checkpoint.source).lower()
    return [
        ("deepseek-r1" in name, FamilyParsers("deepseek_r1", None, "DeepSeek-R1 distills think in <think> blocks")),
        (
            model_type in ("qwen3", "qwen3_moe"),
            FamilyParsers("qwen3", "hermes", "Qwen3: <think> reasoning, Hermes-style <tool_call>"),
        ),
        (
            text_type in ("qwen3_5_text", "qwen3_5_moe_text", "qwen3_next") or model_type == "qwen3_next",
            FamilyParsers("qwen3", "qwen3_coder", "Qwen3.5/3.6/Next: <think> reasoning, XML tool calls"),
        ),
        (model_type == "qwen2", FamilyParsers(None, "hermes", "Qwen2.5: Hermes-style <tool_call>")),
        (
            model_type == "gpt_oss",
            FamilyParsers(
                None,
                "openai",
                "gpt-oss: harmony tool calls (its config hook already sets the openai_gptoss reasoning parser)",
            ),
        ),
        (
            model_type == "llama" and "mistral" not in name,
            FamilyParsers(None, "llama3_json", "Llama 3: JSON tool calls"),
        ),
        (model_type == "mistral" or "mistral" in name, FamilyParsers(None, "mistral", "Mistral: [TOOL_CALLS] format")),
        (
            model_type in ("glm4_moe_lite", "glm4_moe"),
            FamilyParsers(
                "glm45", "glm47" if "4.7" in name else "glm45", "GLM-4.5/4.7: <think> reasoning and GLM tool calls"
            ),
        ),
        (
            model_type == "nemotron_h",
            FamilyParsers("nemotron_v3", "qwen3_coder", "Nemotron 3: reasoning and XML tool calls"),
        ),
        (model_type == "gemma4", FamilyParsers("gemma4", "gemma4", "Gemma 4: thinking channel and its tool format")),
        (model_type == "muse_glimmer", FamilyParsers("muse_glimmer", "muse_glimmer", "Muse Glimmer parsers")),
        (model_type == "deepseek_v3", FamilyParsers("deepseek_v3", "deepseek_v3", "DeepSeek-V3 reasoning and tools")),
        (model_type == "deepseek_v4", FamilyParsers("deepseek_v4", "deepseek_v4", "DeepSeek-V4 reasoning and tools")),
        (
            model_type == "deepseek_v41",
            FamilyParsers("deepseek_v41", "deepseek_v41", "DeepSeek-V4.1 reasoning and tools"),
        ),
        (
            model_type in ("glm_moe_dsa", "glm5_next"),
            FamilyParsers("glm45", "glm47", "GLM-5.x: <think> reasoning and GLM-4.7-style tool calls"),
        ),
        (
            model_type == "qwen4_exp",
            FamilyParsers("qwen3", "qwen3_coder", "Qwen3.8-Flash-Next: <think> reasoning, XML tool calls"),
        ),
        (
            model_type == "minimax_m3_vl" or text_type == "minimax_m3",
            FamilyParsers("minimax_m3", "minimax_m3", "MiniMax-M3 reasoning and tools"),
        ),
    ]


def family_parsers(checkpoint: Checkpoint) -> FamilyParsers:
    for matches, parsers in _rules(checkpoint):
        if matches:
            return _with_template(checkpoint, parsers)
    return _with_template(checkpoint, FamilyParsers(None, None, "no reasoning or tool format known for this family"))


# What a chat template of each format contains. A checkpoint whose template lacks the marker does not
# speak that format (a fine-tune with another template), and the parser would refuse or misparse.
_TOOL_MARKERS = {
    "hermes": ("<tool_call>",),
    "qwen3_coder": ("<tool_call>", "<function="),
    "llama3_json": ("<|python_tag|>", "ipython", "<|eot_id|>"),
    "mistral": ("[TOOL_CALLS]", "[AVAILABLE_TOOLS]"),
    "openai": ("<|channel|>", "<|call|>"),
}
_REASONING_MARKERS = {"qwen3": ("<think>", "enable_thinking"), "deepseek_r1": ("<think>",)}


def _with_template(checkpoint: Checkpoint, parsers: FamilyParsers) -> FamilyParsers:
    """Check the family's formats against the checkpoint's chat template where it ships one: drop a
    parser whose format the template does not speak, and add Hermes where the template emits
    <tool_call> blocks but the family rule names no tool parser."""
    template = checkpoint.chat_template
    if not template:
        return parsers
    reasoning, tool, why = parsers.reasoning, parsers.tool, parsers.why
    if tool in _TOOL_MARKERS and not any(m in template for m in _TOOL_MARKERS[tool]):
        tool, why = None, why + f"; the chat template has no {tool} tool-call markup"
    if reasoning in _REASONING_MARKERS and not any(m in template for m in _REASONING_MARKERS[reasoning]):
        reasoning, why = None, why + f"; the chat template has no {reasoning} reasoning markup"
    if tool is None and "<tool_call>" in template:
        tool, why = "hermes", why + "; the chat template emits <tool_call>"
    return FamilyParsers(reasoning, tool, why)


def tokenizer_note(checkpoint: Checkpoint, facts: EngineFacts) -> str | None:
    """config/model.py: tokenizer_mode "auto" becomes the architecture's own mode, so no flag is
    needed (and the --tokenizer-mode literal may not even list it: 0.30-0.33 omit deepseek_v41)."""
    mode = facts.default_tokenizer_mode(checkpoint.architecture)
    if mode is None:
        return None
    listed = "" if facts.has_tokenizer_mode(mode) else "; the release has no such tokenizer"
    return (
        f"tokenizer mode: vLLM {facts.version} turns the default 'auto' into '{mode}' for "
        f"{checkpoint.architecture} (no --tokenizer-mode flag needed){listed}"
    )


def parser_flags(checkpoint: Checkpoint, facts: EngineFacts) -> tuple[list[str], list[Problem], str]:
    parsers = family_parsers(checkpoint)
    flags, problems = [], []
    known_reasoning, known_tool = facts.reasoning_parsers, facts.tool_parsers
    if not known_reasoning and not known_tool:
        return [], [], f"parsers: {parsers.why}; this facts file lists no parser registries"
    if parsers.reasoning:
        if parsers.reasoning in known_reasoning:
            flags.append(f"--reasoning-parser {parsers.reasoning}")
        else:
            problems.append(_missing("reasoning", parsers.reasoning, facts))
    if parsers.tool:
        if parsers.tool in known_tool:
            flags.append(f"--enable-auto-tool-choice --tool-call-parser {parsers.tool}")
        else:
            problems.append(_missing("tool", parsers.tool, facts))
    return flags, problems, f"parsers: {parsers.why}"


def _missing(kind: Literal["reasoning", "tool"], name: str, facts: EngineFacts) -> Problem:
    return Problem(
        "reasoning_parser_missing" if kind == "reasoning" else "tool_parser_missing",
        f"this model needs the {name!r} {kind} parser, which vLLM "
        f"{facts.version} does not register; pick a newer --engine",
        "proven_constraint",
    )
