"""Apron's SkyPilot target against SkyPilot itself: run with the python of a virtual environment that
holds SkyPilot (scripts/test.sh makes one under .cache/sky-venv) and Apron's source on PYTHONPATH;
tests/test_sky.py runs it and reads the JSON it prints.

    PLAN.json RECORDS_DIR  ->  {"task": ..., "launch": ..., "down": ..., "boot": ...}

The task and its resources are built with SkyPilot's own Task/Resources and read back through its own
YAML parser. Renting a machine is the one thing that cannot run here: sky.launch, sky.down and
sky.stream_and_get are replaced by recorders that bind every call against the real function's
signature (a call SkyPilot would reject fails here too) and return SkyPilot's own RequestId.
"""

from __future__ import annotations

import copy
import inspect
import json
import sys
from pathlib import Path
from typing import Any

import sky
from sky.server.common import RequestId

from apron.boot.hosts import SshSettings
from apron.boot.runner import boot
from apron.boot.session import BootOptions
from apron.boot.sky import SkyCluster
from apron.boot.targets import parse_target
from apron.errors import HostFault
from apron.plan.result import Plan
from apron.records.store import RecordStore

CALLS: list[dict[str, Any]] = []
REAL = {name: getattr(sky, name) for name in ("launch", "down", "stream_and_get")}


def recorder(name: str, result: Any = None, error: Exception | None = None) -> None:
    signature = inspect.signature(REAL[name])

    def call(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)  # TypeError if SkyPilot would not take this call
        CALLS.append({"function": name, "arguments": {k: _plain(v) for k, v in bound.arguments.items()}})
        if error is not None:
            raise error
        return result

    setattr(sky, name, call)


def _plain(value: Any) -> Any:
    if isinstance(value, sky.Task):
        return {"task": value.name}
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


def task_facts(plan: Plan) -> dict[str, Any]:
    task = SkyCluster.for_plan(plan, cloud="aws").task(sky)
    config = task.to_yaml_config()
    again = sky.Task.from_yaml_config(copy.deepcopy(config))  # SkyPilot's own parser and schema check
    (resources,) = list(again.resources)
    return {
        "is_task": isinstance(task, sky.Task),
        "config": config,
        "cloud": str(resources.cloud),
        "accelerators": resources.accelerators,
        "disk_size": resources.disk_size,
        "setup": again.setup,
    }


def launch_and_down(plan: Plan) -> dict[str, Any]:
    CALLS.clear()
    recorder("launch", RequestId("launch-1"))
    recorder("stream_and_get", (1, None))
    recorder("down", RequestId("down-1"))
    cluster = SkyCluster.for_plan(plan, cloud="aws")
    host = cluster.launch(SshSettings(options=("ConnectTimeout=5",)))
    cluster.down()
    return {"cluster": cluster.name, "host": host.address, "calls": list(CALLS)}


def failed_launch(plan: Plan) -> dict[str, Any]:
    """A launch SkyPilot refuses is a host fault, and the half-made cluster is still taken down."""
    CALLS.clear()
    recorder("launch", error=sky.exceptions.ResourcesUnavailableError("no H100 capacity in us-east-1"))
    recorder("stream_and_get", None)
    recorder("down", RequestId("down-2"))
    cluster = SkyCluster.for_plan(plan, cloud="aws")
    try:
        cluster.launch(SshSettings())
        raised = None
    except HostFault as exc:
        raised = exc.message
    cluster.down()
    return {"host_fault": raised, "calls": list(CALLS)}


def boot_on_sky(plan: Plan, records: Path) -> dict[str, Any]:
    """The whole runner on a sky target whose machine never answers: teardown still runs sky.down."""
    CALLS.clear()
    recorder("launch", RequestId("launch-3"))
    recorder("stream_and_get", (1, None))
    recorder("down", RequestId("down-3"))
    options = BootOptions(retries=0)
    ssh = SshSettings(options=("ConnectTimeout=2", "ConnectionAttempts=1"))
    result = boot(plan, [parse_target("sky:aws")], options, RecordStore(records), ssh=ssh)
    record = result.record
    return {
        "outcome": record.outcome,
        "fault": record.fault.to_json() if record.fault else None,
        "calls": [c["function"] for c in CALLS],
    }


def main() -> None:
    plan = Plan.from_json(json.loads(Path(sys.argv[1]).read_text()))
    print(
        json.dumps(
            {
                "sky_version": sky.__version__,
                "task": task_facts(plan),
                "launch": launch_and_down(plan),
                "failed_launch": failed_launch(plan),
                "boot": boot_on_sky(plan, Path(sys.argv[2])),
            }
        )
    )


if __name__ == "__main__":
    main()
