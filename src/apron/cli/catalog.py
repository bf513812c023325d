"""`apron gpus` and `apron models` (the bundled catalogs) and `apron example` (inputs to try Apron with)."""

from __future__ import annotations

import click

from apron.cli.groups import GroupedCommand, GroupedGroup
from apron.cli.options import json_option, option
from apron.cli.shared import emit_json


@click.command("gpus", cls=GroupedCommand)
@json_option()
def gpus_command(as_json: bool) -> None:
    """List the GPU catalog: PyTorch's total bytes, compute capability, memory bandwidth, interconnect, aliases."""
    from apron.hardware import all_gpus

    rows = [
        {
            "name": g.name,
            "total_bytes": g.total_bytes,
            "is_total_exact": g.is_total_exact,
            "compute_capability": "{}.{}".format(*g.compute_capability),
            "aliases": list(g.aliases),
            "total_bytes_basis": g.total_bytes_basis,
            "memory_bandwidth_bytes_per_second": g.memory_bandwidth_bytes_per_second,
            "memory_bandwidth_basis": g.memory_bandwidth_basis,
            "interconnect": g.interconnect.for_count(8)[0] if g.interconnect else None,
            "interconnect_basis": g.interconnect.basis if g.interconnect else None,
        }
        for g in all_gpus()
    ]
    if as_json:
        emit_json(rows)
        return
    from apron.report.tables import render_table
    from apron.units import format_bytes

    table = [
        (
            g.name,
            format_bytes(g.total_bytes),
            "exact" if g.is_total_exact else "approximate",
            "{}.{}".format(*g.compute_capability),
            f"{(g.memory_bandwidth_bytes_per_second or 0) / 1e9:,.0f} GB/s",
            g.interconnect.for_count(8)[0] if g.interconnect else "-",
            ", ".join(g.aliases),
        )
        for g in all_gpus()
    ]
    header = (
        "GPU (PyTorch's name)",
        "total",
        "total is",
        "capability",
        "memory bandwidth",
        "GPUs linked by",
        "aliases",
    )
    click.echo(render_table(header, table, right=(1, 4)))
    click.echo("\n--gpu cpu plans for vLLM's CPU platform on this machine (its NUMA node's memory).")


@click.command("models", cls=GroupedCommand)
@json_option()
def models_command(as_json: bool) -> None:
    """The bundled catalog: models `apron plan` reads with no network (id, architecture, layout, size)."""
    from apron.plan.models import catalog_models
    from apron.report.tables import render_table
    from apron.units import format_bytes

    rows = catalog_models()
    if as_json:
        emit_json([row.to_json() for row in rows])
        return
    click.echo(
        render_table(
            ("model", "architecture", "layout family", "size"),
            [(r.repo_id, r.architecture, r.layout_family, format_bytes(r.checkpoint_bytes)) for r in rows],
            right=(3,),
        )
    )


@click.group("example", cls=GroupedGroup)
def example_group() -> None:
    """Example inputs to try Apron with, made on this machine."""


@example_group.command("tiny")
@click.argument("folder", type=click.Path(file_okay=False))
@option(
    "--family",
    group="Model",
    type=click.Choice(["llama", "qwen3", "gemma2", "mamba", "idefics3"]),
    default="llama",
    show_default=True,
    help="The architecture: Llama, Qwen3, Gemma 2 (sliding + full attention), Mamba, Idefics3 (vision).",
)
@option("--layers", group="Model", type=click.IntRange(1, 64), default=8, show_default=True)
@option(
    "--max-position-embeddings",
    "max_positions",
    group="Model",
    type=click.IntRange(16),
    default=4096,
    show_default=True,
    help="The model's context length.",
)
@json_option("Print what was written as JSON.")
def example_tiny_command(folder: str, family: str, layers: int, max_positions: int, as_json: bool) -> None:
    """Write a tiny random-weight checkpoint of a real architecture to FOLDER (a few MiB, no network):
    config, tokenizer and safetensors that vLLM loads. Its answers mean nothing; boots skip the checks."""
    from pathlib import Path

    from apron.checkpoint.example import TinySpec, write_tiny_model
    from apron.units import format_bytes

    model = write_tiny_model(Path(folder), TinySpec(family=family, num_layers=layers, max_positions=max_positions))
    if as_json:
        emit_json(model.to_json())
        return
    click.echo(
        f"{model.folder}: {model.architecture}, {model.num_parameters:,} random parameters, "
        f"{format_bytes(model.total_bytes)} in {len(model.files)} files"
    )
