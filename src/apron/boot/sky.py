"""`--on sky[:cloud]`: rent the plan's GPUs through SkyPilot (`pip install 'apron[sky]'`).

The task is built with SkyPilot's own Task/Resources API: the accelerator named from the plan's GPU,
count = tensor-parallel size, a disk sized from the checkpoint, a setup that installs the pinned vLLM
in a venv. Apron then reaches the cluster over SSH (SkyPilot writes a `Host <cluster>` entry to the
user's SSH config) and boots it like any ssh target. Autostop (down) is the safety net if Apron
dies; `down()` runs in every outcome. SkyPilot is imported only here, only when used; from 0.10 its
client calls return a request id, awaited with sky.stream_and_get.
"""

from __future__ import annotations

import importlib
import math
import shlex
import uuid
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from apron.boot.hosts import SshHost, SshSettings, SshTarget
from apron.errors import BadInput, HostFault
from apron.plan.result import Plan

GIB = 2**30
# PyTorch device name (the plan's GPU) -> SkyPilot accelerator name.
ACCELERATORS = {
    "NVIDIA H100 80GB HBM3": "H100",
    "NVIDIA H100 PCIe": "H100",
    "NVIDIA H100 NVL": "H100-NVL",
    "NVIDIA H200": "H200",
    "NVIDIA B200": "B200",
    "NVIDIA A100-SXM4-80GB": "A100-80GB",
    "NVIDIA A100 80GB PCIe": "A100-80GB",
    "NVIDIA A100-SXM4-40GB": "A100",
    "NVIDIA L4": "L4",
    "NVIDIA L40S": "L40S",
    "NVIDIA L40": "L40",
    "NVIDIA A10G": "A10G",
    "NVIDIA A10": "A10",
    "NVIDIA GeForce RTX 4090": "RTX4090",
    "NVIDIA GeForce RTX 3090": "RTX3090",
    "NVIDIA GeForce RTX 5090": "RTX5090",
    "NVIDIA RTX A6000": "A6000",
    "NVIDIA RTX 6000 Ada Generation": "RTX6000-Ada",
    "Tesla T4": "T4",
    "Tesla V100-SXM2-32GB": "V100-32GB",
}
VENV = "$HOME/apron-vllm"
AUTOSTOP_MINUTES = 30


def import_sky() -> ModuleType:
    try:  # optional, heavy: only when a sky target is used
        return importlib.import_module("sky")
    except ImportError:
        raise BadInput("--on sky needs SkyPilot: pip install 'apron[sky]' (then `sky check`)") from None


def accelerator_for(gpu_name: str) -> str:
    try:
        return ACCELERATORS[gpu_name]
    except KeyError:
        raise BadInput(f"no SkyPilot accelerator name is known for '{gpu_name}'; boot it over ssh:// instead") from None


def disk_gib_for(plan: Plan) -> int:
    """The checkpoint (downloaded once), the vLLM venv and compile caches, with room to spare."""
    checkpoint = plan.checkpoint_bytes or 0
    return max(100, int(math.ceil(checkpoint * 1.2 / GIB)) + 80)


@dataclass
class SkyCluster:
    name: str
    plan: Plan
    cloud: str | None = None
    launched: bool = False

    @classmethod
    def for_plan(cls, plan: Plan, cloud: str | None = None) -> SkyCluster:
        return cls(name=f"apron-{uuid.uuid4().hex[:8]}", plan=plan, cloud=cloud)

    def describe(self) -> str:
        accelerator = accelerator_for(self.plan.gpu_name)
        return f"{self.plan.gpu_count} x {accelerator}, {disk_gib_for(self.plan)} GiB disk, {self.cloud or 'any cloud'}"

    def setup_script(self) -> str:
        version = self.plan.engine_version
        return "\n".join(
            [
                "set -e",
                f"python3 -m venv {VENV} || (sudo apt-get update && sudo apt-get install -y python3-venv && python3 -m venv {VENV})",
                f"{VENV}/bin/pip install -q --upgrade pip",
                f"{VENV}/bin/pip install -q {shlex.quote('vllm==' + version)} huggingface_hub",
            ]
        )

    def task(self, sky: ModuleType | None = None) -> Any:
        """The SkyPilot Task for this plan (built, not launched)."""
        sky = sky or import_sky()
        resources = sky.Resources(
            infra=self.cloud,
            accelerators={accelerator_for(self.plan.gpu_name): self.plan.gpu_count},
            disk_size=disk_gib_for(self.plan),
        )
        task = sky.Task(name=self.name, setup=self.setup_script(), run=None)
        task.set_resources(resources)
        return task

    def launch(self, ssh_settings: SshSettings) -> SshHost:
        sky = import_sky()
        try:
            request = sky.launch(
                self.task(sky), cluster_name=self.name, idle_minutes_to_autostop=AUTOSTOP_MINUTES, down=True
            )
            sky.stream_and_get(request)
        except Exception as exc:  # noqa: BLE001 - any provisioning failure is the machine's, not the model's
            self.launched = True  # a half-made cluster must still be taken down
            raise HostFault(f"SkyPilot could not start {self.name}: {type(exc).__name__}: {exc}") from None
        self.launched = True
        # SkyPilot adds `Host <cluster>` to ~/.ssh/config with its own key and known host.
        return SshHost(SshTarget(self.name, options=ssh_settings.options))

    def down(self) -> None:
        if not self.launched:
            return
        sky = import_sky()
        sky.stream_and_get(sky.down(self.name))
