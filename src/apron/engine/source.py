"""Get a vLLM release's Python sources: a wheel from PyPI (pip download), a local wheel, or a tree.

Fetching bytes is kept apart from parsing them (see `apron.engine.extract`). Nothing here imports
vLLM; files are read from the wheel's zip or from disk.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable
from email.parser import HeaderParser
from pathlib import Path

from apron.errors import BadInput, Failed
from apron.frozen import frozen

_SPEC = re.compile(r"vllm\s*==\s*v?(\d+(?:\.\d+)*(?:[.+\-\w]*)?)")
# The abi3 wheel's Python files are the same on every platform; asking for this one explicitly
# lets `pip download` work from any machine, including one that could not install vLLM.
_PIP_PLATFORM = "manylinux_2_28_x86_64"


@frozen
class EngineSource:
    """A readable vLLM source: `kind` is "wheel" or "tree"; `root` is the wheel file or the folder
    that holds the `vllm/` package."""

    kind: str
    root: Path
    from_user: bool  # a path the user named (errors in it are bad input) vs a PyPI download

    def list_py(self) -> list[str]:
        """Paths of the package's .py files, relative to `vllm/`, sorted."""
        if self.kind == "wheel":
            with zipfile.ZipFile(self.root) as zf:
                names = [n[5:] for n in zf.namelist() if n.startswith("vllm/") and n.endswith(".py")]
        else:
            package = self.root / "vllm"
            names = [p.relative_to(package).as_posix() for p in package.rglob("*.py")]
        return sorted(names)

    def reader(self) -> SourceReader:
        return SourceReader(self)

    def metadata(self) -> dict[str, list[str]]:
        """The dist-info METADATA headers (empty for a tree without one)."""
        text = self._dist_info_file("METADATA")
        if text is None:
            return {}
        message = HeaderParser().parsestr(text)
        out: dict[str, list[str]] = {}
        for key, value in message.items():
            out.setdefault(key, []).append(value)
        return out

    def _dist_info_file(self, name: str) -> str | None:
        if self.kind == "wheel":
            with zipfile.ZipFile(self.root) as zf:
                for entry in zf.namelist():
                    if re.fullmatch(r"vllm-[^/]+\.dist-info/" + name, entry):
                        return zf.read(entry).decode("utf-8", "replace")
            return None
        for folder in sorted(self.root.glob("vllm-*.dist-info")):
            if (folder / name).is_file():
                return (folder / name).read_text("utf-8", "replace")
        return None

    def sha256(self) -> str:
        """The wheel's sha256; for a tree, a hash over its sorted (path, file sha256) pairs."""
        digest = hashlib.sha256()
        if self.kind == "wheel":
            with open(self.root, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            return digest.hexdigest()
        reader = self.reader()
        for path in self.list_py():
            digest.update(f"{path}\0{hashlib.sha256(reader.read_bytes(path)).hexdigest()}\n".encode())
        return digest.hexdigest()


class SourceReader:
    """Reads files of one source; keeps the wheel's zip open between reads."""

    def __init__(self, source: EngineSource):
        self.source = source
        self._zip = zipfile.ZipFile(source.root) if source.kind == "wheel" else None

    def read_bytes(self, path: str) -> bytes:
        if self._zip is not None:
            return self._zip.read("vllm/" + path)
        return (self.source.root / "vllm" / path).read_bytes()

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8", "replace")

    def exists(self, path: str) -> bool:
        if self._zip is not None:
            try:
                self._zip.getinfo("vllm/" + path)
                return True
            except KeyError:
                return False
        return (self.source.root / "vllm" / path).is_file()

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()


def parse_spec(spec: str) -> str | None:
    """`vllm==0.33.0` -> `0.33.0`; None when the spec is not a version pin."""
    match = _SPEC.fullmatch(spec.strip())
    return match.group(1) if match else None


def open_local(path: Path) -> EngineSource:
    """A local wheel, a folder holding `vllm/`, or the `vllm/` package folder itself."""
    if not path.exists():
        raise BadInput(f"{path}: no such file or folder; give vllm==X, a vLLM wheel or a source tree")
    if path.is_file():
        if path.suffix != ".whl" or not zipfile.is_zipfile(path):
            raise BadInput(f"{path}: not a wheel (.whl zip); give vllm==X, a vLLM wheel or a source tree")
        return EngineSource("wheel", path.resolve(), from_user=True)
    if (path / "vllm" / "__init__.py").is_file():
        return EngineSource("tree", path.resolve(), from_user=True)
    if path.name == "vllm" and (path / "__init__.py").is_file():
        return EngineSource("tree", path.parent.resolve(), from_user=True)
    raise BadInput(
        f"{path}: no vllm/__init__.py in this folder; point at the folder that holds the "
        f"vllm package (an unpacked wheel or a checkout)"
    )


def download_wheel(version: str, dest: Path, say: Callable[[str], None]) -> Path:
    """`pip download --no-deps` the release's wheel into `dest` (reused when already there)."""
    dest.mkdir(parents=True, exist_ok=True)
    existing = sorted(dest.glob(f"vllm-{version}-*.whl"))
    if existing:
        say(f"using cached wheel {existing[0]}")
        return existing[0]
    say(f"downloading vllm=={version} with pip (about 300 MB) into {dest}")
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--platform",
        _PIP_PLATFORM,
        "--dest",
        str(dest),
        "--disable-pip-version-check",
        f"vllm=={version}",
    ]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=3600, env={**os.environ, "PIP_NO_INPUT": "1"}
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Failed(f"pip download vllm=={version} failed to run: {exc}") from None
    output = (done.stdout or "") + (done.stderr or "")
    if done.returncode != 0:
        if "No matching distribution" in output or "Could not find a version" in output:
            raise BadInput(
                f"vllm=={version}: no such release with a Linux wheel on the package index; "
                f"check the version (`pip index versions vllm`)"
            )
        last = [line for line in output.splitlines() if line.strip()][-1:] or ["no output"]
        raise Failed(
            f"pip download vllm=={version} failed (exit {done.returncode}): {last[0].strip()}; "
            f"check the network or pass a local wheel path instead"
        )
    found = sorted(dest.glob(f"vllm-{version}-*.whl"))
    if not found:
        raise Failed(f"pip download vllm=={version} reported success but left no wheel in {dest}")
    return found[0]
