"""The `apron` command line: thin wrappers over the packages; data on stdout, messages on stderr.

Exit codes: 0 ok, 1 failed, 2 bad input. A traceback only with APRON_DEBUG=1.
"""
from __future__ import annotations

import json
import os
import sys

import click

from apron.errors import ApronError, BadInput


def emit_json(data) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def say(message: str) -> None:
    """A message or progress line for a person: always stderr."""
    click.echo(message, err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="apron", prog_name="apron")
def cli() -> None:
    """Will this LLM fit, boot and answer on this GPU with this vLLM release - and with which flags?"""


@cli.command("gpus")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def gpus_command(as_json: bool) -> None:
    """List the GPU catalog: PyTorch's total bytes, compute capability and aliases."""
    from apron.hardware import all_gpus

    rows = [{"name": g.name, "total_bytes": g.total_bytes, "is_total_exact": g.is_total_exact,
             "compute_capability": "%d.%d" % g.compute_capability, "aliases": list(g.aliases),
             "total_bytes_basis": g.total_bytes_basis} for g in all_gpus()]
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        mark = "" if r["is_total_exact"] else " (approx.)"
        click.echo(f"{r['name']:<34} {r['total_bytes'] / 2**30:8.2f} GiB{mark:<10} cc {r['compute_capability']:<5} "
                   f"{', '.join(r['aliases'])}")


def main(argv: list[str] | None = None) -> int:
    debug = os.environ.get("APRON_DEBUG") == "1"
    try:
        cli.main(args=argv, prog_name="apron", standalone_mode=False)
    except ApronError as exc:
        if debug:
            raise
        say(f"apron: error: {exc.message}")
        return exc.exit_code
    except click.exceptions.Abort:
        say("apron: interrupted")
        return 130
    except click.ClickException as exc:
        if debug:
            raise
        say(f"apron: error: {exc.format_message()}")
        return BadInput.exit_code if exc.exit_code == 2 else exc.exit_code
    except KeyboardInterrupt:
        say("apron: interrupted")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the last line of defence against a bare traceback
        if debug:
            raise
        say(f"apron: internal error: {type(exc).__name__}: {exc} (run with APRON_DEBUG=1 for a traceback)")
        return 1
    return 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
