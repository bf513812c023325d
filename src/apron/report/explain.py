"""`apron plan --explain`: where each GiB of the GPU goes, as a stacked bar, with labels."""

from __future__ import annotations

from apron.plan.result import Plan

BAR_WIDTH = 60
_SEGMENTS = (  # (quantity, title, bar character)
    ("weights_bytes_per_gpu", "weights", "W"),
    ("activation_peak_bytes", "activation peak", "A"),
    ("cudagraph_bytes", "CUDA graphs", "G"),
    ("non_torch_bytes", "non-torch", "N"),
    ("available_kv_bytes", "KV cache", "K"),
)


def _gib(n: float) -> str:
    return f"{n / 2**30:7.2f} GiB"


def render_explain(plan: Plan) -> str:
    q = plan.quantities
    total = plan.total_bytes_per_gpu
    requested = q["requested_bytes"].value
    rows, bar = [], ""
    for name, title, char in _SEGMENTS:
        value = q[name].value
        if value is None:
            rows.append(f"  {char} {title:<18} {'unknown':>11}  [{q[name].label}] {q[name].basis}")
            continue
        rows.append(f"  {char} {title:<18} {_gib(value)}  [{q[name].label}]")
        bar += char * max(round(BAR_WIDTH * max(value, 0) / total), 0)
    reserve = total - (requested or 0)
    rows.append(
        f"  . {'utilization reserve':<18} {_gib(reserve)}  [derived] (1 - "
        f"{plan.settings.gpu_memory_utilization}) x total, outside vLLM's request"
    )
    bar = (bar + "." * BAR_WIDTH)[:BAR_WIDTH] if len(bar) < BAR_WIDTH else bar[:BAR_WIDTH]
    lines = [f"GPU memory ({_gib(total).strip()} as PyTorch sees it):", f"  [{bar}]", *rows]
    per_token = q["kv_bytes_per_token"].value
    if per_token:
        lines.append(f"  KV: {2**30 / per_token:,.0f} tokens per GiB ({per_token:,} bytes per token)")
    lines += _peak_lines(plan)
    lines += _component_lines(plan)
    lines += _weights_lines(plan)
    return "\n".join(lines)


def _component_lines(plan: Plan) -> list[str]:
    """The named terms behind non-torch and CUDA graphs, each with its label and source."""
    lines = []
    for key, title in (("non_torch", "non-torch"), ("cudagraphs", "CUDA graphs")):
        parts = plan.details.get(key) or []
        if parts:
            lines += ["", f"{title}:"]
            lines += [f"   {p['name']:<48} {_gib(p['num_bytes'])}  [{p['label']}] {p['basis']}" for p in parts]
    encoder = plan.details.get("encoder")
    if encoder and encoder.get("batch"):
        batch = encoder["batch"]
        lines += [
            "",
            f"vision encoder ({encoder['family']}): {batch['items']} dummy {batch['modality']} item(s) of "
            f"{batch['tokens_per_item']:,} tokens, {batch['patches']:,} patches, tower TP mode "
            f"{batch['encoder_tp_mode']} ({batch['basis']})",
        ]
    elif encoder:
        lines += ["", f"vision encoder ({encoder['family']}): {encoder['skipped'] or encoder['unknown']}"]
    return lines


def _peak_lines(plan: Plan) -> list[str]:
    activation = plan.details.get("activation")
    if not activation:
        return []
    lines = ["", "activation peak: the largest moment of the profiling run"]
    for moment in activation["moments"]:
        mark = "*" if moment["name"] == activation.get("peak") else " "
        size = "not modelled" if moment["bytes"] is None else _gib(moment["bytes"]).strip()
        lines.append(f" {mark} {moment['name']}: {size} - {moment['basis']}")
        for buf in moment["buffers"]:
            lines.append(f"      {buf['name']:<40} {str(tuple(buf['shape'])):<22} {_gib(buf['bytes'])}")
        for buf in moment.get("not_yet_live") or ():
            lines.append(f"      less {buf['name']:<73} {_gib(-buf['bytes'])}")
    for name, why in activation.get("skipped", []):
        lines.append(f"   {name}: does not happen ({why})")
    return lines


def _weights_lines(plan: Plan) -> list[str]:
    weights = plan.details.get("weights")
    if not weights:
        return []
    lines = ["", f"weights ({weights['runtime_dtype']}):"]
    for group in weights["groups"]:
        lines.append(f"   {group['group']:<32} {_gib(group['bytes_per_gpu'])}")
    for skipped in weights["skipped"]:
        lines.append(f"   not loaded: {skipped['reason']:<20} {_gib(skipped['bytes'])}")
    return lines
