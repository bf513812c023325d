"""A byte-level BPE tokenizer written as the Hugging Face `tokenizers` library stores one (tokenizer.json),
with the standard library only: no training, no `tokenizers` import.

Every byte has a symbol (the byte-to-printable-character table GPT-2's byte-level BPE uses, so any text
encodes and any id decodes), and a fixed list of common English and JSON words is built up from them by
merges, left to right, so prompts cost a few tokens a word rather than one a byte. The merges never
need to be optimal: a BPE merge is valid when both halves and their join are in the vocabulary, which
holds by construction.
"""

from __future__ import annotations

from typing import Any

from apron.frozen import frozen

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>")
BOS, EOS, PAD = "<|endoftext|>", "<|im_end|>", "<|pad|>"
TOOL_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")
THINK_TOKENS = ("<think>", "</think>")
# Idefics3Processor looks these up in the tokenizer; vLLM's chat path inserts "<image>".
IMAGE_TOKENS = ("<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>")

WORDS = (
    "the a an of to in is it that for on with as was at by be this from or have not are but we they you "
    "he she his her which one all were there what when where who how why can will would should could do "
    "does did has had if then than so no yes up out about into over after before more most some any each "
    "other only new time first last long great little own old right big high small large next early young "
    "important few public same able model token memory cache serve server request latency throughput batch "
    "engine kernel tensor weight layer attention vector matrix block page hello world python test check "
    "deploy plan boot log measure record fast slow tiny random value number text chat user assistant "
    "system answer question reply stream output input prompt name arguments function city weather unit "
    "celsius fahrenheit location json type object string integer boolean properties required enum "
    "description parameters tool tools call current country capital population millions whole describe "
    "whether its Paris Rome Berlin Madrid France write word letter backwards reversed only reply think "
    "through arrival train leaves journey takes minutes arrive HH MM say use now get true false null "
    "minimum maximum additionalProperties is_capital population_millions get_weather Get The What Use "
    "Describe Write Think Reply Say Hello A"
).split()
PUNCTUATION = ('": "', '", "', '":', '",', '{"', '"}', "]}", "}}", "</", "/>", "...", "\n\n", "  ", "    ")


def bytes_to_unicode() -> dict[int, str]:
    """The byte-level alphabet: printable bytes stand for themselves, the others are shifted past 255
    in order, so no symbol is whitespace or a control character (as GPT-2's tokenizer does)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, shift = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + shift)
            shift += 1
    return table


def _symbols(text: str, table: dict[int, str]) -> list[str]:
    return [table[b] for b in text.encode("utf-8")]


@frozen
class TinyTokenizer:
    vocab: dict[str, int]
    merges: tuple[tuple[str, str], ...]
    added: tuple[tuple[str, int, bool], ...]  # (content, id, special)

    @property
    def size(self) -> int:
        return len(self.vocab) + sum(1 for content, _, _ in self.added if content not in self.vocab)

    def id_of(self, token: str) -> int:
        for content, index, _ in self.added:
            if content == token:
                return index
        return self.vocab[token]

    def to_json(self) -> dict[str, Any]:
        """tokenizer.json as the `tokenizers` library writes a byte-level BPE tokenizer."""
        flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [
                {"id": index, "content": content, **flags, "special": special} for content, index, special in self.added
            ],
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {
                "type": "BPE",
                "dropout": None,
                "unk_token": None,
                "continuing_subword_prefix": None,
                "end_of_word_suffix": None,
                "fuse_unk": False,
                "byte_fallback": False,
                "ignore_merges": False,
                "vocab": self.vocab,
                "merges": [list(pair) for pair in self.merges],
            },
        }


def build_tokenizer(*, tools: bool = False, think: bool = False, image: bool = False) -> TinyTokenizer:
    """Special tokens first (ids 0-3), the 256 byte symbols, the merged words; then the added tokens the
    options ask for (tool-call and think tags as single non-special ids, image tokens as special)."""
    table = bytes_to_unicode()
    vocab: dict[str, int] = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    for byte in range(256):
        vocab.setdefault(table[byte], len(vocab))
    merges: list[tuple[str, str]] = []
    pieces = [" " + w for w in WORDS] + list(WORDS) + list(PUNCTUATION)
    for piece in dict.fromkeys(pieces):
        symbols = _symbols(piece, table)
        joined = symbols[0]
        for symbol in symbols[1:]:
            merged = joined + symbol
            if merged not in vocab:
                vocab[merged] = len(vocab)
                merges.append((joined, symbol))
            joined = merged
    added = [(token, index, True) for index, token in enumerate(SPECIAL_TOKENS)]
    extra = [(t, False) for t in (TOOL_TOKENS if tools else ())] + [(t, False) for t in (THINK_TOKENS if think else ())]
    extra += [(t, True) for t in (IMAGE_TOKENS if image else ())]
    for token, special in extra:
        added.append((token, len(vocab) + len(added) - len(SPECIAL_TOKENS), special))
    return TinyTokenizer(vocab, tuple(merges), tuple(added))
