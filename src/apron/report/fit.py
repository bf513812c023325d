"""The `apron fit` table: feasible configurations by cost, the top choice's command, and one reason per
configuration that does not serve the load. Rendered from the apron.fit/1 document, so the table and
`--json` cannot disagree."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any


_REASON_WIDTH = 150


def render_fit(doc: dict[str, Any], top: int = 10) -> str:
    req = doc["request"]
    prices = doc["prices"]
    rows = doc["configurations"]
    feasible = [r for r in rows if r["status"] == "feasible"]
    who = f"{req['provider']}'s" if req.get("provider") else "the cheapest provider's"
    lines = [
        f"{doc['model']['repo_id'] or doc['model']['source']}: {req['users']} users at {req['context_tokens']:,} "
        f"tokens of context, vLLM {doc['engine']['version']}, {who} {req['tier']} prices "
        f"({'bundled table' if prices['file'] == 'bundled' else prices['file']}, dated {' to '.join(sorted(set(prices['dates'])))}; "
        "estimates, not quotes)",
        "",
    ]
    if feasible:
        lines += _table(feasible[:top])
        if len(feasible) > top:
            lines.append(f"  ... {len(feasible) - top} more feasible (--top {len(feasible)} or --json)")
        lines += _decode_note(feasible[:top])
        best = feasible[0]
        tight = " (tight: the spare KV is within the prediction's error band)" if best["tight"] else ""
        lines += ["", f"top choice: {best['count']} x {best['gpu']}{tight}", f"  {best['command']}"]
        lines += [f"  * {change}" for change in best["changes"]]
        sources = sorted({f"{r['price']['source']}, {r['price']['date']}" for r in feasible[:top] if r["price"]})
        lines += [""] + [f"price source: {s}" for s in sources]
        unpriced = {r["gpu"]: r["price_note"] for r in feasible[:top] if r["price"] is None and r.get("price_note")}
        lines += [f"no price for {gpu}: {why}" for gpu, why in unpriced.items()]
    else:
        lines.append(f"no configuration serves {req['users']} users at {req['context_tokens']:,} tokens")
    candidate = next((r for r in rows if r["candidate"]), None)
    if candidate is not None:
        verdict = "feasible" if candidate["status"] == "feasible" else f"{candidate['status']}: {candidate['reason']}"
        lines += ["", f"the candidate's own configuration ({candidate['count']} x {candidate['gpu']}): {verdict}"]
    for status, title in (("infeasible", "does not serve the load"), ("unknown", "unknown (not ranked)")):
        group = [r for r in rows if r["status"] == status]
        if group:
            lines += ["", f"{title}:"] + [f"  {_name(r)}: {_reason(r)}" for r in group]
    if doc.get("notes"):
        lines += [""] + [f"note: {n}" for n in doc["notes"]]
    return "\n".join(lines)


def _table(rows: list[dict[str, Any]]) -> list[str]:
    header = ("#", "GPU x count", "TP", "$/hour", "provider", "link", "max conc.", "headroom", "tok/s/user <=", "flags")
    body = []
    for i, r in enumerate(rows, 1):
        price = r["price"]
        flags = [f for f in r["flags"] if not f.startswith(("--max-model-len", "--tensor-parallel-size"))]
        changed = {c.split(":")[0] for c in r["changes"]}
        shown = " ".join(f + ("*" if any(f in c for c in changed) else "") for f in flags)
        body.append(
            (
                str(i),
                _name(r) + (" (candidate)" if r["candidate"] else ""),
                str(r["tensor_parallel_size"]),
                f"{r['cost_per_hour_usd']:.2f}" if r["cost_per_hour_usd"] is not None else "no price",
                f"{price['provider'] or ''} {price['date']}".strip() if price else "-",
                r["interconnect"],
                f"{r['max_concurrency']:.1f}",
                f"{100 * r['kv_headroom']:+.0f}%" + ("~" if r["tight"] else ""),
                _speed(r["decode_bound"]),
                shown or "-",
            )
        )
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    right = {0, 2, 3, 6, 7, 8}

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    chosen = [f"  * {i}: {change}" for i, r in enumerate(rows, 1) for change in r["changes"]]
    return (
        [line(header).rstrip()]
        + [line(row).rstrip() for row in body]
        + (["  * settings fit chose, by row:", *chosen] if chosen else [])
    )


def _speed(bound: dict[str, Any] | None) -> str:
    if bound is None or bound["tokens_per_second_per_user"] is None:
        return "unknown"
    return f"{bound['tokens_per_second_per_user']:.1f}"


def _decode_note(rows: list[dict[str, Any]]) -> list[str]:
    if not any(r["decode_bound"] for r in rows):
        return []
    return [
        "  tok/s/user <=: a predicted upper bound on decode speed per user with every request at its full "
        "context, from memory bandwidth and the all-reduce's link (docs/fit.md): a bound, not a benchmark"
    ]


def _name(row: dict[str, Any]) -> str:
    return f"{row['count']} x {row['gpu']}"


def _reason(row: dict[str, Any]) -> str:
    reason = row["reason"] or ""
    if len(reason) > _REASON_WIDTH:
        reason = reason[: _REASON_WIDTH - 3] + "..."
    tried = [t for t in row["tried"] if t["max_concurrency"] is not None and not t.get("needs_consent")]
    if tried:
        reason += "; with " + ", ".join(f"{t['change']}: {t['max_concurrency']:.2f}" for t in tried)
    offered = [t for t in row["tried"] if t["max_concurrency"] is not None and t.get("needs_consent")]
    if offered:
        reason += "; " + ", ".join(
            f"{t['change']} would hold {t['max_concurrency']:.2f} (needs --allow-fp8-kv)" for t in offered
        )
    skipped = [t["result"] for t in row["tried"] if t["max_concurrency"] is None and t["result"]]
    return reason + "".join(f"; fp8 KV {s}" for s in skipped)


_AGREES = {True: "Apron agrees it fits", False: "Apron says it does NOT fit", None: "Apron cannot tell (unknown)"}


def render_candidate(section: dict[str, Any]) -> str:
    """Where a `--from` plan came from, whether Apron agrees and what that covers, every flag sorted,
    and how the printed command differs from the file's."""
    count = section["gpu_count"] or "?"
    gpu = f"on {count} x {section['gpu']}" if section["gpu"] else "(the file names no GPU type)"
    engine = f", vLLM {section['engine']} pinned in the file" if section["engine"] else ""
    name = f" {section['name']!r} of {len(section['deployments'])}," if len(section.get("deployments", [])) > 1 else ""
    lines = [
        f"candidate: {section['file']} ({section.get('format_title', section['format'])},{name} "
        f"sha256 {section['sha256'][:16]})",
        f"  {section['model'] or '(the file names no model)'} {gpu}{engine}",
        "  " + _agreement(section),
    ]
    titles = (
        ("planned", "planned with"),
        ("carried", "carried into the command"),
        ("no_memory_effect", "no effect on memory"),
        ("not_understood", "NOT planned (the plan does not account for them)"),
        ("refused", "REFUSED by vLLM's parser (vllm serve stops)"),
    )
    for key, title in titles:
        if section["flags"].get(key):
            lines.append(f"  {title}: {' '.join(section['flags'][key])}")
    env = [f"{v['name']} ({v['why']})" for v in section.get("env", []) if v["use"] in ("not_planned", "not_read")]
    planned_env = [f"{v['name']}={v['value']}" for v in section.get("env", []) if v["use"] == "planned"]
    if planned_env:
        lines.append(f"  environment planned: {' '.join(planned_env)}")
    if env:
        lines.append(f"  environment NOT planned: {'; '.join(env)}")
    command = section.get("command") or {}
    if command.get("added_by_apron"):
        lines.append(f"  the command adds: {' '.join(command['added_by_apron'])}")
    if command.get("changed_by_apron"):
        lines.append(f"  the command changes: {'; '.join(command['changed_by_apron'])}")
    lines += [f"  note: {n}" for n in section["notes"]]
    return "\n".join(lines)


def _agreement(section: dict[str, Any]) -> str:
    """The verdict on the file, and what it does not cover."""
    said = _AGREES[section["apron_agrees_it_fits"]]
    missing = section.get("not_planned") or []
    if not missing or section["apron_agrees_it_fits"] is None:
        return said + (" (everything in the file was planned)" if not missing else "")
    return f"{said}, for what it planned; NOT planned: {', '.join(missing)}"
