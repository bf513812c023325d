"""The `apron fit` table: feasible configurations by cost, the top choice's command, and one reason per
configuration that does not serve the load. Rendered from the apron.fit/1 document, so the table and
`--json` cannot disagree."""

from __future__ import annotations

_REASON_WIDTH = 150


def render_fit(doc: dict, top: int = 10) -> str:
    req = doc["request"]
    prices = doc["prices"]
    rows = doc["configurations"]
    feasible = [r for r in rows if r["status"] == "feasible"]
    lines = [
        f"{doc['model']['repo_id'] or doc['model']['source']}: {req['users']} users at {req['context_tokens']:,} "
        f"tokens of context, vLLM {doc['engine']['version']}, {req['tier']} prices "
        f"({'bundled table' if prices['file'] == 'bundled' else prices['file']}, dated {' to '.join(sorted(set(prices['dates'])))}; "
        "estimates, not quotes)",
        "",
    ]
    if feasible:
        lines += _table(feasible[:top])
        if len(feasible) > top:
            lines.append(f"  ... {len(feasible) - top} more feasible (--top {len(feasible)} or --json)")
        best = feasible[0]
        tight = " (tight: the spare KV is within the prediction's error band)" if best["tight"] else ""
        lines += ["", f"top choice: {best['count']} x {best['gpu']}{tight}", f"  {best['command']}"]
        lines += [f"  * {change}" for change in best["changes"]]
        sources = sorted({f"{r['price']['source']}, {r['price']['date']}" for r in feasible[:top] if r["price"]})
        lines += [""] + [f"price source: {s}" for s in sources]
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
    return "\n".join(lines)


def _table(rows: list[dict]) -> list[str]:
    header = ("#", "GPU x count", "TP", "$/hour", "price", "max conc.", "headroom", "flags")
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
                f"{r['max_concurrency']:.1f}",
                f"{100 * r['kv_headroom']:+.0f}%" + ("~" if r["tight"] else ""),
                shown or "-",
            )
        )
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    right = {0, 2, 3, 5, 6}

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return (
        [line(header).rstrip()]
        + [line(row).rstrip() for row in body]
        + (["  * a setting fit chose (see 'changes' in --json)"] if any(r["changes"] for r in rows) else [])
    )


def _name(row: dict) -> str:
    return f"{row['count']} x {row['gpu']}"


def _reason(row: dict) -> str:
    reason = row["reason"] or ""
    if len(reason) > _REASON_WIDTH:
        reason = reason[: _REASON_WIDTH - 3] + "..."
    tried = [t for t in row["tried"] if t["max_concurrency"] is not None]
    if tried:
        reason += "; with " + ", ".join(f"{t['change']}: {t['max_concurrency']:.2f}" for t in tried)
    skipped = [t["result"] for t in row["tried"] if t["max_concurrency"] is None and t["result"]]
    return reason + "".join(f"; fp8 KV {s}" for s in skipped)


_AGREES = {True: "Apron agrees it fits", False: "Apron says it does NOT fit", None: "Apron cannot tell (unknown)"}


def render_candidate(section: dict) -> str:
    """Where a `--from` plan came from, whether Apron agrees, and every flag sorted."""
    gpu = f"on {section['gpu_count'] or '?'} x {section['gpu']}" if section["gpu"] else "(the file names no GPU)"
    engine = f", vLLM {section['engine']} pinned in the file" if section["engine"] else ""
    lines = [
        f"candidate: {section['file']} ({section['format']}, sha256 {section['sha256'][:16]})",
        f"  {section['model']} {gpu}{engine}",
        f"  {_AGREES[section['apron_agrees_it_fits']]}",
    ]
    titles = (
        ("planned", "planned with"),
        ("carried", "carried into the command"),
        ("no_memory_effect", "no effect on memory"),
        ("not_understood", "NOT understood (the plan does not account for them)"),
    )
    for key, title in titles:
        if section["flags"][key]:
            lines.append(f"  {title}: {' '.join(section['flags'][key])}")
    lines += [f"  note: {n}" for n in section["notes"]]
    return "\n".join(lines)
