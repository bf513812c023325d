"""`--on TARGET`: local, ssh://user@host[:port], sky[:cloud]."""

from __future__ import annotations

import re

from apron.errors import BadInput
from apron.frozen import frozen

SKY_CLOUDS = (
    "aws",
    "gcp",
    "azure",
    "lambda",
    "runpod",
    "kubernetes",
    "k8s",
    "oci",
    "paperspace",
    "fluidstack",
    "cudo",
    "nebius",
    "vast",
    "do",
    "hyperbolic",
    "scp",
    "ibm",
    "vsphere",
    "seeweb",
    "primeintellect",
)


@frozen
class TargetSpec:
    kind: str  # "local" | "ssh" | "sky"
    host: str | None = None
    user: str | None = None
    port: int | None = None
    cloud: str | None = None

    @property
    def address(self) -> str:
        if self.kind == "ssh":
            user = f"{self.user}@" if self.user else ""
            port = f":{self.port}" if self.port else ""
            return f"ssh://{user}{self.host}{port}"
        if self.kind == "sky":
            return f"sky:{self.cloud}" if self.cloud else "sky"
        return "local"


SSH = re.compile(
    r"ssh://(?:(?P<user>[A-Za-z0-9._-]+)@)?(?P<host>\[[0-9A-Fa-f:]+\]|[A-Za-z0-9._-]+)(?::(?P<port>\d+))?/?"
)


def parse_target(text: str) -> TargetSpec:
    value = text.strip()
    if value == "local":
        return TargetSpec("local")
    if value.startswith("ssh://"):
        match = SSH.fullmatch(value)
        if not match:
            raise BadInput(f"--on '{text}': an ssh target looks like ssh://user@host or ssh://user@host:2222")
        port = int(match["port"]) if match["port"] else None
        if port is not None and not 0 < port < 65536:
            raise BadInput(f"--on '{text}': port {port} is out of range")
        return TargetSpec("ssh", host=match["host"].strip("[]"), user=match["user"], port=port)
    if value == "sky" or value.startswith("sky:"):
        cloud = value[4:].lower() or None
        if cloud is not None and cloud not in SKY_CLOUDS:
            raise BadInput(f"--on '{text}': unknown cloud '{cloud}' (SkyPilot clouds: {', '.join(SKY_CLOUDS)})")
        return TargetSpec("sky", cloud=cloud)
    raise BadInput(f"--on '{text}': a target is local, ssh://user@host[:port] or sky[:cloud]")
