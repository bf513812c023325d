"""Where Apron keeps its cache and data on this machine (APRON_HOME overrides both), and the one way
it writes a file there."""

from __future__ import annotations

import os
import sys
from functools import lru_cache

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from pathlib import Path


# The folders are worked out as text: a plan reads only the engine-facts folder, and pathlib's import
# (with ntpath, fnmatch and urllib.parse) is ~5 ms of its start. The Path-returning functions below
# import it for every other caller.


def _root(kind: str) -> str:
    home = os.environ.get("APRON_HOME")
    if home:
        return os.path.join(home, kind)
    env = os.environ
    return _platform_dir(kind, env.get("HOME"), env.get("XDG_CACHE_HOME"), env.get("XDG_DATA_HOME"))


@lru_cache(maxsize=8)
def _platform_dir(kind: str, *environment: str | None) -> str:
    """platformdirs' answer, kept per environment it reads (a plan asks several times)."""
    simple = _xdg_dir(kind)
    if simple is not None:
        return simple
    import platformdirs

    return platformdirs.user_cache_dir("apron") if kind == "cache" else platformdirs.user_data_dir("apron")


# kind -> (the XDG variable, its default under HOME), from the XDG Base Directory spec
_XDG = {"cache": ("XDG_CACHE_HOME", "/.cache"), "data": ("XDG_DATA_HOME", "/.local/share")}


def _xdg_dir(kind: str) -> str | None:
    """The folder platformdirs gives an ordinary user on Linux, without importing it (with what it
    imports, about a third of a plan's own start-up): the XDG variable where it is an absolute path,
    else HOME's default (root too: `use_site_for_root` is off unless asked for). None where
    platformdirs' own rules decide: another system, a relative or blank variable (releases 4.x differ
    there), no absolute HOME. tests/test_paths.py compares both."""
    if sys.platform != "linux" or hasattr(sys, "getandroidapilevel"):
        return None
    variable, default = _XDG[kind]
    value, home = os.environ.get(variable), os.environ.get("HOME", "")
    if value is not None:
        return os.path.join(value, "apron") if value.startswith("/") else None
    return os.path.join(home.rstrip("/") + default, "apron") if home.startswith("/") and home.strip("/") else None


def read_bytes(path: str) -> bytes:
    """A file's bytes by its text path: the planning path's one way to read a file (no pathlib)."""
    with open(path, "rb") as file:
        return file.read()


def _path(text: str) -> Path:
    from pathlib import Path

    return Path(text)


def cache_dir() -> Path:
    return _path(_root("cache"))


def data_dir() -> Path:
    return _path(_root("data"))


def engine_facts_folder() -> str:
    """The synced engine facts' folder, as text (the planning path's one folder)."""
    return os.path.join(_root("cache"), "engine-facts")


def engine_facts_dir() -> Path:
    return _path(engine_facts_folder())


def records_dir() -> Path:
    return data_dir() / "records"


def write_atomic(path: Path, data: bytes, *, overwrite: bool = True, temp_dir: Path | None = None) -> bool:
    """Write every file Apron keeps (records, blobs, rule statuses, engine facts, header cache) the
    same way: a temp file in TEMP_DIR (default: the target's folder) with the permissions an ordinary
    file gets under the user's umask (mkstemp's 0600 would hide records kept in a shared repo), synced,
    then moved into place, so a reader never sees half a file. With overwrite=False an existing file is
    kept (a content-addressed record never changes) and False is returned; True when PATH was written.
    """
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    folder = temp_dir or path.parent
    folder.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{path.name[:40]}.")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            os.replace(temp, path)
            written = True
        else:
            written = _link_once(temp, path)
        _fsync_dir(path.parent)
        return written
    finally:
        try:
            os.unlink(temp)  # still there unless moved or linked into place
        except FileNotFoundError:
            pass


def _link_once(temp: str, path: Path) -> bool:
    try:
        os.link(temp, path)  # atomic, and refuses to replace an existing file
    except FileExistsError:
        return False
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
