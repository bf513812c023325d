"""A needle in a haystack, sized with the served model's own tokenizer and template (/tokenize)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from apron.frozen import frozen

FULL_HAYSTACK_TOKENS = 32_768
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I: a misread is not a right answer
ESTIMATED_CHARS_PER_TOKEN = 4
SAMPLE_SENTENCES = 200

_SUBJECTS = (
    "The engineer",
    "A small cat",
    "The committee",
    "An old sailor",
    "The farmer",
    "A student",
    "The orchestra",
    "The night train",
    "A careful reader",
    "The village baker",
    "The river",
)
_VERBS = (
    "described",
    "carried",
    "painted",
    "forgot",
    "measured",
    "followed",
    "repaired",
    "counted",
    "admired",
    "questioned",
    "collected",
)
_OBJECTS = (
    "a wooden bridge",
    "the morning light",
    "three blue boxes",
    "an unfinished letter",
    "the northern road",
    "a quiet garden",
    "the harvest",
    "a broken clock",
    "the market square",
    "an empty harbour",
    "the winter plans",
)
_TAILS = (
    "before noon",
    "without a word",
    "near the old mill",
    "for the second time",
    "in the rain",
    "after the meeting",
    "along the coast",
    "with great care",
    "under a grey sky",
    "at dusk",
)


@frozen
class Haystack:
    messages: list[dict[str, Any]]
    code: str
    prompt_tokens: int  # measured by the server's /tokenize, or estimated (is_estimate)
    is_estimate: bool
    depth_fraction: float  # where the needle sits, 0 = start, 1 = end
    note: str  # how it was sized, and why it is smaller than 32k where it is


def _sentence(rng: random.Random) -> str:
    return f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_TAILS)}."


def _messages(filler: list[str], depth_index: int, code: str) -> list[dict[str, Any]]:
    needle = f"The secret code is {code}."
    text = " ".join(filler[:depth_index] + [needle] + filler[depth_index:])
    prompt = (
        "Below is a long text. Somewhere in it is a secret code.\n\n"
        + text
        + "\n\nWhat is the secret code? Reply with the code only."
    )
    return [{"role": "user", "content": prompt}]


def target_tokens(max_model_len_tokens: int | None, answer_budget_tokens: int) -> tuple[int, str]:
    """The prompt size to aim for, and a note saying why where it is less than the full 32k."""
    if max_model_len_tokens is None:
        return FULL_HAYSTACK_TOKENS, "the server does not report max_model_len; full 32k haystack"
    room = max_model_len_tokens - answer_budget_tokens
    if room >= FULL_HAYSTACK_TOKENS:
        return FULL_HAYSTACK_TOKENS, "full 32k haystack"
    return max(room, 0), (
        f"haystack scaled down to {room} tokens: the served max_model_len is "
        f"{max_model_len_tokens}, {answer_budget_tokens} kept for the answer"
    )


def build_haystack(
    count_tokens: Callable[[list[dict[str, Any]]], int | None],
    *,
    max_model_len_tokens: int | None,
    answer_budget_tokens: int,
    rng: random.Random,
) -> Haystack:
    """Fill the prompt up to the target with filler sentences and one needle at a random depth."""
    target, note = target_tokens(max_model_len_tokens, answer_budget_tokens)
    code = "".join(rng.choice(CODE_ALPHABET) for _ in range(8))
    depth = round(rng.uniform(0.2, 0.8), 2)
    filler = [_sentence(rng) for _ in range(SAMPLE_SENTENCES)]

    def build(n: int) -> list[dict[str, Any]]:
        while len(filler) < n:
            filler.append(_sentence(rng))
        return _messages(filler[:n], int(n * depth), code)

    count = count_tokens
    empty, sample = count(build(0)), count(build(SAMPLE_SENTENCES))
    if empty is None or sample is None:
        return _estimated(build, target, depth, code, note)
    per_sentence = max((sample - empty) / SAMPLE_SENTENCES, 1.0)
    n, tokens = _fit(
        lambda k: count(build(k)) or 0, max(int((target - empty) / per_sentence), 0), target, per_sentence, empty
    )
    return Haystack(build(n), code, tokens, False, depth, note + f"; {tokens} prompt tokens by the server's tokenizer")


def _fit(count: Callable[[int], int], n: int, target: int, per_sentence: float, empty: int) -> tuple[int, int]:
    """The most sentences whose measured prompt fits the target. The per-sentence rate is an average,
    so step toward the target a few times and keep the best fit (rarely more than two /tokenize calls)."""
    best = (0, empty)
    for _ in range(6):
        tokens = count(n)
        if tokens <= target:
            best = max(best, (n, tokens))
            if target - tokens < 2 * per_sentence:
                break
            n += max(int((target - tokens) / per_sentence) - 1, 1)
        else:
            n = max(n - math.ceil((tokens - target) / per_sentence) - 1, 0)
    return best


def _estimated(
    build: Callable[[int], list[dict[str, Any]]], target: int, depth: float, code: str, note: str
) -> Haystack:
    """Without /tokenize, size by characters; the check says so."""
    chars_per_sentence = len(build(SAMPLE_SENTENCES)[0]["content"]) / SAMPLE_SENTENCES
    n = max(int(target * ESTIMATED_CHARS_PER_TOKEN / max(chars_per_sentence, 1.0)), 0)
    messages = build(n)
    tokens = len(messages[0]["content"]) // ESTIMATED_CHARS_PER_TOKEN
    return Haystack(
        messages,
        code,
        tokens,
        True,
        depth,
        note + f"; ~{tokens} tokens by a {ESTIMATED_CHARS_PER_TOKEN}-characters-per-token estimate "
        "(the server has no /tokenize)",
    )
