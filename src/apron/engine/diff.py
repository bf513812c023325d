"""What changed between two releases' facts: registries, defaults, parsers, and mirrored functions
whose source changed (plans that rely on them need re-checking)."""

from __future__ import annotations

from typing import Any

RECHECK_NOTE = "plans for these layouts need re-checking"


def flatten(value: Any, prefix: str = "") -> dict[str, object]:
    """{"a.b": leaf} for nested dicts (and lists of dicts, by index); other lists are leaves."""
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        value = {str(i): item for i, item in enumerate(value)}
    if not isinstance(value, dict):
        return {prefix: value}
    out = {}
    for key, item in value.items():
        out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _keyed(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    old, new = old or {}, new or {}
    changed = {}
    for key in sorted(set(old) & set(new)):
        if old[key] != new[key]:
            a, b = flatten(old[key]), flatten(new[key])
            changed[key] = {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
    return {"added": sorted(set(new) - set(old)), "removed": sorted(set(old) - set(new)), "changed": changed}


def _leaves(old: Any, new: Any) -> dict[str, list[object]]:
    a, b = flatten(old or {}), flatten(new or {})
    return {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def _split_key(key: str) -> tuple[str, str]:
    path, _, qual = key.partition(":")
    return path, qual


def mirrored_changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Functions matched by qualified name across files, so a move is a move, not add + remove."""

    def by_qual(table: dict[str, Any]) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for key, digest in (table or {}).items():
            path, qual = _split_key(key)
            out.setdefault(qual, {})[path] = digest
        return out

    before, after = by_qual(old), by_qual(new)
    changed, moved = [], {}
    for qual in sorted(set(before) & set(after)):
        a, b = before[qual], after[qual]
        if set(a) != set(b):
            moved[qual] = [sorted(a), sorted(b)]
        if sorted(a.values()) != sorted(b.values()):
            changed.append(qual)
    return {
        "changed": changed,
        "moved": moved,
        "added": sorted(set(after) - set(before)),
        "removed": sorted(set(before) - set(after)),
        "note": RECHECK_NOTE,
    }


def _entries(facts: dict[str, Any], key: str, fields: tuple[str, ...]) -> set[tuple[Any, ...]]:
    return {tuple(item[f] for f in fields) for item in facts.get(key) or []}


def _list_changes(old: dict[str, Any], new: dict[str, Any], key: str, fields: tuple[str, ...]) -> dict[str, Any]:
    a, b = _entries(old, key, fields), _entries(new, key, fields)

    def as_dicts(items: set[tuple[Any, ...]]) -> list[dict[str, Any]]:
        return [dict(zip(fields, item, strict=True)) for item in sorted(items)]

    return {"added": as_dicts(b - a), "removed": as_dicts(a - b)}


def diff_facts(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    registry_old, registry_new = old["registry"], new["registry"]
    return {
        "from": old["version"],
        "to": new["version"],
        "pins": _leaves(old.get("pins"), new.get("pins")),
        "architectures": _keyed(registry_old["architectures"], registry_new["architectures"]),
        "previously_supported": _keyed(
            registry_old.get("previously_supported"), registry_new.get("previously_supported")
        ),
        "out_of_tree": _keyed(registry_old.get("out_of_tree"), registry_new.get("out_of_tree")),
        "config_hooks": _keyed(old.get("config_hooks"), new.get("config_hooks")),
        "defaults": _leaves(old.get("defaults"), new.get("defaults")),
        "quantization": _keyed(old.get("quantization"), new.get("quantization")),
        "attention_backends": _keyed(old.get("attention_backends"), new.get("attention_backends")),
        "backend_priority": _leaves(old.get("backend_priority"), new.get("backend_priority")),
        "parsers": {
            kind: _keyed((old.get("parsers") or {}).get(kind), (new.get("parsers") or {}).get(kind))
            for kind in ("reasoning", "tool")
        },
        "tokenizer": _leaves(old.get("tokenizer"), new.get("tokenizer")),
        "mirrored_functions": mirrored_changes(
            old.get("mirrored_functions") or {}, new.get("mirrored_functions") or {}
        ),
        "log_formats": _list_changes(old, new, "log_formats", ("file", "function", "level", "format")),
        "refusals": _list_changes(old, new, "refusals", ("file", "function", "exception", "template")),
    }
