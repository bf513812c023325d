"""A Hugging Face Hub on 127.0.0.1 for tests: real HTTP, the Hub's protocol, no network.

Two ThreadingHTTPServers run in background threads:
  * the Hub: GET /api/models/{repo}[/revision/{rev}] (model info: sha, siblings, sizes with
    ?blobs=true) and HEAD/GET /{repo}/resolve/{rev}/{file}. Small files are answered directly with
    ETag (the git blob sha1) and X-Repo-Commit; LFS files (*.safetensors) get a 302 to the CDN with
    X-Linked-Etag, X-Linked-Size and X-Repo-Commit, as huggingface_hub expects (file_download.py:
    get_hf_file_metadata reads exactly these headers).
  * the CDN: a second origin (another port), so a client that forwards Authorization across the
    redirect is caught; it serves the same files at /cdn/{repo}/{sha}/{file}?X-Sig=...

Both honour single Range requests (206 + Content-Range, 416 past the end) over virtual files: the
bytes a shard's header needs, then its data region as zeros generated chunk by chunk, never held in
memory. Errors look like the Hub's: X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound,
GatedRepo) and X-Error-Message headers with a JSON body.

Faults are injected by path substring (`server.fault(...)`): a status (401/404/429/500/503, with
Retry-After), a connection reset, a slow answer, a body cut short, or a server that ignores Range.
The server counts the body bytes it sent, per path and in total, and keeps a log of every request;
both are written before the answer leaves, so a client that has its answer finds it counted.
Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import struct
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

CHUNK_BYTES = 64 * 1024
_ZEROS = bytes(CHUNK_BYTES)
FIXTURES = Path(__file__).parent / "fixtures"


@dataclass(frozen=True)
class VirtualFile:
    """`prefix` bytes followed by zeros up to `size` bytes; the zeros are made as they are sent."""

    prefix: bytes
    size: int
    is_lfs: bool = False

    @classmethod
    def of(cls, content: bytes, is_lfs: bool = False) -> VirtualFile:
        return cls(prefix=content, size=len(content), is_lfs=is_lfs)

    def chunks(self, start: int, end: int) -> Iterator[bytes]:
        """Bytes [start, end) in chunks of at most CHUNK_BYTES."""
        position = start
        while position < end:
            if position < len(self.prefix):
                chunk = self.prefix[position : min(end, len(self.prefix), position + CHUNK_BYTES)]
            else:
                chunk = _ZEROS[: min(CHUNK_BYTES, end - position)]
            yield chunk
            position += len(chunk)

    @property
    def git_sha1(self) -> str:
        digest = hashlib.sha1(b"blob %d\0" % self.size)
        for chunk in self.chunks(0, self.size) if not self.is_lfs else ():
            digest.update(chunk)
        return digest.hexdigest()

    @property
    def lfs_sha256(self) -> str:
        # Stands in for the content hash: hashing gigabytes of zeros would only slow the tests.
        return hashlib.sha256(self.prefix + str(self.size).encode()).hexdigest()


@dataclass
class Repo:
    repo_id: str
    sha: str
    files: dict[str, VirtualFile]
    refs: dict[str, str] = field(default_factory=dict)  # branch or tag -> commit sha
    gated: bool = False  # model info is public; files need an accepted token (401 without, 403 with another)
    private: bool = False  # everything answers 401 RepoNotFound without an accepted token

    def commit_for(self, revision: str) -> str | None:
        if revision in self.refs:
            return self.refs[revision]
        if re.fullmatch(r"[0-9a-f]{7,40}", revision) and self.sha.startswith(revision):
            return self.sha
        return None


@dataclass
class Fault:
    match: str  # substring of the request path (query included)
    kind: str  # "status" | "reset" | "slow" | "cut" | "ignore_range"
    status: int = 503
    times: int | None = 1  # requests it affects; None = all
    retry_after: str | None = None
    delay_seconds: float = 0.0
    method: str | None = None  # None = any method
    server: str | None = None  # "hub" | "cdn" | None = both
    range_prefix: str | None = None  # only requests whose Range header starts with this
    hits: int = 0


@dataclass(frozen=True)
class Seen:
    server: str
    method: str
    path: str
    headers: dict[str, str]
    status: int | None


class HubServer:
    """Start with `with HubServer() as hub:`; `hub.url` is the HF_ENDPOINT to use."""

    def __init__(self, tokens: tuple[str, ...] = ()):
        self.repos: dict[str, Repo] = {}
        self.tokens = set(tokens)  # tokens with access to gated and private repos
        self.unknown_repo_status = 404  # the real Hub says 401 to anonymous callers
        self.ignore_range = False
        self.faults: list[Fault] = []
        self.bytes_sent: Counter[str] = Counter()
        self.log: list[Seen] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._hub = _make_server(self, "hub")
        self._cdn = _make_server(self, "cdn")
        self._threads: list[threading.Thread] = []

    # --- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> HubServer:
        for server in (self._hub, self._cdn):
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *exc) -> None:
        for server in (self._hub, self._cdn):
            server.shutdown()
            server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._hub.server_address[1]}"

    @property
    def cdn_url(self) -> str:
        return f"http://127.0.0.1:{self._cdn.server_address[1]}"

    # --- content --------------------------------------------------------------------------------

    def add_repo(
        self,
        repo_id: str,
        files: dict[str, bytes | VirtualFile],
        sha: str | None = None,
        refs: tuple[str, ...] = ("main",),
        **flags,
    ) -> Repo:
        sha = sha or hashlib.sha1(repo_id.encode()).hexdigest()
        virtual = {
            name: content
            if isinstance(content, VirtualFile)
            else VirtualFile.of(content, is_lfs=name.endswith(".safetensors"))
            for name, content in files.items()
        }
        repo = Repo(repo_id, sha, virtual, {ref: sha for ref in refs}, **flags)
        self.repos[repo_id] = repo
        return repo

    def add_snapshot(
        self, document: dict, *, repo_id: str | None = None, extra_files: dict[str, bytes] | None = None, **flags
    ) -> Repo:
        """Serve a fixture snapshot as its repo: files written by tests/fixtures/materialize.py
        (--header-only, so a few KB), each shard extended by its data region as virtual zeros."""
        sys.path.insert(0, str(FIXTURES))
        import materialize

        files: dict[str, bytes | VirtualFile] = {}
        with tempfile.TemporaryDirectory() as tmp:
            materialize.materialize(document, tmp, header_only=True)
            for path in sorted(Path(tmp).iterdir()):
                content = path.read_bytes()
                if path.name.endswith(".safetensors"):
                    data = materialize.data_length(document["safetensors"][path.name])
                    files[path.name] = VirtualFile(content, len(content) + data, is_lfs=True)
                else:
                    files[path.name] = content
        files.update(extra_files or {})
        return self.add_repo(repo_id or document["repo_id"], files, sha=document.get("revision"), **flags)

    def fault(self, match: str, kind: str = "status", **options) -> Fault:
        fault = Fault(match=match, kind=kind, **options)
        with self._lock:
            self.faults.append(fault)
        return fault

    # --- counting -------------------------------------------------------------------------------

    def reset_counts(self) -> None:
        with self._lock:
            self.bytes_sent.clear()
            self.log.clear()
            self.max_in_flight = 0

    @property
    def total_bytes_sent(self) -> int:
        return sum(self.bytes_sent.values())

    def bytes_sent_where(self, predicate) -> int:
        return sum(n for path, n in self.bytes_sent.items() if predicate(path))

    def requests(self, substring: str = "", server: str | None = None) -> list[Seen]:
        return [s for s in list(self.log) if substring in s.path and (server is None or s.server == server)]

    # --- used by the handler --------------------------------------------------------------------

    def _take_fault(self, server: str, method: str, path: str, range_header: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if (
                    fault.match in path
                    and fault.method in (None, method)
                    and fault.server in (None, server)
                    and (fault.range_prefix is None or range_header.startswith(fault.range_prefix))
                    and (fault.times is None or fault.hits < fault.times)
                ):
                    fault.hits += 1
                    return fault
        return None

    def _count(self, path: str, num_bytes: int) -> None:
        with self._lock:
            self.bytes_sent[path] += num_bytes

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _note(self, seen: Seen) -> None:
        with self._lock:
            self.log.append(seen)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


def _make_server(hub: HubServer, role: str) -> ThreadingHTTPServer:
    handler = type(f"{role.title()}Handler", (_Handler,), {"hub": hub, "role": role})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    return server


class _Reset(Exception):
    """The handler dropped the connection on purpose."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the Hub: every answer carries Content-Length
    hub: HubServer
    role: str

    def log_message(self, *args) -> None:  # quiet: the request log is in hub.log
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def _serve(self, method: str) -> None:
        self._method = method
        self._noted = False
        self.hub._enter()
        try:
            fault = self.hub._take_fault(self.role, method, self.path, self.headers.get("Range") or "")
            if fault is None or not self._apply(fault, method):
                self._route(method, fault)
        except _Reset:
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):  # the client stopped reading: expected
            self.close_connection = True
        finally:
            self._note(None)  # no answer was started (a reset): noted now
            self.hub._leave()

    def _note(self, status: int | None) -> None:
        """Log the request once, before the client can see any answer to it: a test that reads the
        log right after its request returned must find it there."""
        if not self._noted:
            self._noted = True
            headers = {k.lower(): v for k, v in self.headers.items()}
            self.hub._note(Seen(self.role, self._method, self.path, headers, status))

    def _apply(self, fault: Fault, method: str) -> bool:
        """Act out a fault; True when it answered the request itself."""
        if fault.kind == "slow":
            time.sleep(fault.delay_seconds)
            return False
        if fault.kind == "reset":
            self._note(None)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()  # linger 0: the client sees a reset, not a clean close
            raise _Reset()
        if fault.kind == "status":
            extra = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
            self._error(fault.status, None, f"injected {fault.status}", method, extra)
            return True
        return False  # "cut" and "ignore_range" change how the file is sent

    # --- routing --------------------------------------------------------------------------------

    def _route(self, method: str, fault: Fault | None) -> None:
        path = urlsplit(self.path).path
        if self.role == "cdn":
            return self._cdn(path, method, fault)
        if path.startswith("/api/models/") and "/tree/" in path:
            return self._tree(path[len("/api/models/") :], method)
        if path.startswith("/api/models/"):
            return self._model_info(path[len("/api/models/") :], method)
        if "/resolve/" in path:
            return self._resolve(path, method, fault)
        self._error(404, None, "Not found", method)

    def _model_info(self, rest: str, method: str) -> None:
        repo_id, _, revision = rest.partition("/revision/")
        repo = self._repo(unquote(repo_id), method, for_files=False)
        if repo is None:
            return
        sha = self._commit(repo, unquote(revision) if revision else "main", method)
        if sha is None:
            return
        blobs = "blobs=true" in (urlsplit(self.path).query or "").lower()
        siblings = [self._sibling(name, vf, blobs) for name, vf in sorted(repo.files.items())]
        body = {
            "_id": repo.sha[:24],
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "sha": sha,
            "private": repo.private,
            "gated": "manual" if repo.gated else False,
            "disabled": False,
            "lastModified": "2025-01-01T00:00:00.000Z",
            "tags": [],
            "siblings": siblings,
        }
        self._send_bytes(200, json.dumps(body).encode(), method, {"Content-Type": "application/json"})

    def _tree(self, rest: str, method: str) -> None:
        """GET /api/models/{repo}/tree/{revision}: the file listing snapshot_download reads (flat repos only)."""
        repo_id, _, revision = rest.partition("/tree/")
        repo = self._repo(unquote(repo_id), method, for_files=False)
        if repo is None:
            return
        if self._commit(repo, unquote(revision.split("/", 1)[0]), method) is None:
            return
        entries = []
        for name, vf in sorted(repo.files.items()):
            entry = {"type": "file", "oid": vf.git_sha1, "size": vf.size, "path": name}
            if vf.is_lfs:
                entry["lfs"] = {"oid": vf.lfs_sha256, "size": vf.size, "pointerSize": 135}
            entries.append(entry)
        self._send_bytes(200, json.dumps(entries).encode(), method, {"Content-Type": "application/json"})

    @staticmethod
    def _sibling(name: str, vf: VirtualFile, blobs: bool) -> dict:
        if not blobs:
            return {"rfilename": name}
        entry = {"rfilename": name, "size": vf.size, "blobId": vf.git_sha1}
        if vf.is_lfs:
            entry["size"] = 135  # the git pointer's size, as the Hub reports it; the real size is in lfs
            entry["lfs"] = {"size": vf.size, "sha256": vf.lfs_sha256, "pointerSize": 135}
        return entry

    def _resolve(self, path: str, method: str, fault: Fault | None) -> None:
        repo_part, _, rest = path.lstrip("/").partition("/resolve/")
        revision, _, filename = rest.partition("/")
        repo = self._repo(unquote(repo_part), method, for_files=True)
        if repo is None:
            return
        sha = self._commit(repo, unquote(revision), method)
        if sha is None:
            return
        name = unquote(filename)
        vf = repo.files.get(name)
        if vf is None:
            return self._error(404, "EntryNotFound", f"Entry not found: {name}", method, {"X-Repo-Commit": sha})
        headers = {"X-Repo-Commit": sha, "Accept-Ranges": "bytes"}
        if vf.is_lfs:
            location = f"{self.hub.cdn_url}/cdn/{quote(repo.repo_id)}/{sha}/{quote(name)}?X-Sig={vf.lfs_sha256[:16]}"
            headers.update(
                {
                    "Location": location,
                    "ETag": f'"{vf.lfs_sha256}"',
                    "X-Linked-Etag": f'"{vf.lfs_sha256}"',
                    "X-Linked-Size": str(vf.size),
                }
            )
            return self._send_bytes(302, b"", method, headers)
        headers["ETag"] = f'"{vf.git_sha1}"'
        self._send_file(vf, method, headers, fault)

    def _cdn(self, path: str, method: str, fault: Fault | None) -> None:
        parts = [unquote(p) for p in path.split("/")[2:]]  # ["org", "name", sha, file] or ["name", sha, file]
        if len(parts) < 3 or "X-Sig=" not in self.path:
            return self._error(403, None, "Signature missing", method)
        repo = self.hub.repos.get("/".join(parts[:-2]))
        vf = repo.files.get(parts[-1]) if repo is not None and repo.sha == parts[-2] else None
        if vf is None:
            return self._error(404, None, "NoSuchKey", method)
        self._send_file(vf, method, {"ETag": f'"{vf.lfs_sha256}"', "Accept-Ranges": "bytes"}, fault)

    # --- access ---------------------------------------------------------------------------------

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization") or ""
        return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None

    def _repo(self, repo_id: str, method: str, for_files: bool) -> Repo | None:
        repo = self.hub.repos.get(repo_id)
        token = self._token()
        allowed = token is not None and token in self.hub.tokens
        if repo is None or (repo.private and not allowed):
            status = 401 if repo is not None else self.hub.unknown_repo_status
            self._error(status, "RepoNotFound", "Repository not found", method)
            return None
        if repo.gated and for_files and not allowed:
            status = 403 if token else 401
            self._error(
                status,
                "GatedRepo",
                f"Access to model {repo_id} is restricted. You must have access to it "
                "and be authenticated to access it. Please log in.",
                method,
            )
            return None
        return repo

    def _commit(self, repo: Repo, revision: str, method: str) -> str | None:
        sha = repo.commit_for(revision)
        if sha is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", method)
        return sha

    # --- sending --------------------------------------------------------------------------------

    def _error(self, status: int, code: str | None, message: str, method: str, extra: dict | None = None) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message, **(extra or {})}
        if code:
            headers["X-Error-Code"] = code
        self._send_bytes(status, json.dumps({"error": message}).encode(), method, headers)

    def _send_bytes(self, status: int, body: bytes, method: str, headers: dict) -> None:
        self._start(status, {**headers, "Content-Length": str(len(body))})
        if method != "HEAD" and body:
            self._write(body)

    def _send_file(self, vf: VirtualFile, method: str, headers: dict, fault: Fault | None) -> None:
        wanted = (
            None
            if self.hub.ignore_range or (fault and fault.kind == "ignore_range")
            else _parse_range(self.headers.get("Range"), vf.size)
        )
        if wanted == "unsatisfiable":
            return self._send_bytes(416, b"", method, {**headers, "Content-Range": f"bytes */{vf.size}"})
        start, end = wanted if wanted else (0, vf.size)
        status = 206 if wanted else 200
        sized = {**headers, "Content-Length": str(end - start), "Content-Type": "application/octet-stream"}
        if wanted:
            sized["Content-Range"] = f"bytes {start}-{end - 1}/{vf.size}"
        self._start(status, sized)
        if method == "HEAD":
            return
        stop = start + (end - start) // 2 if fault and fault.kind == "cut" else end
        for chunk in vf.chunks(start, stop):
            self._write(chunk)
        if stop < end:  # the body stops short of its Content-Length, then the connection drops
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            raise _Reset()

    def _start(self, status: int, headers: dict) -> None:
        self._note(status)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()

    def _write(self, chunk: bytes) -> None:
        self.hub._count(urlsplit(self.path).path, len(chunk))  # counted before the client can read it
        self.wfile.write(chunk)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:  # the socket was reset on purpose or by the client
            pass


def _parse_range(value: str | None, size: int):
    """(start, end) for a single 'bytes=' range, end exclusive; None for no usable Range."""
    match = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", value or "")
    if not match or match.group(1) == match.group(2) == "":
        return None
    first, last = match.groups()
    if first == "":  # suffix range: the last N bytes
        return (max(0, size - int(last)), size) if int(last) > 0 else "unsatisfiable"
    start = int(first)
    if start >= size:
        return "unsatisfiable"
    end = min(size, int(last) + 1) if last else size
    return (start, end)


def main() -> int:
    """Serve fixture snapshots by hand: python tests/hub_server.py [PORT-less; prints HF_ENDPOINT]."""
    import gzip

    with HubServer() as hub:
        for path in sorted((FIXTURES / "checkpoints").glob("*.json.gz")):
            hub.add_snapshot(json.loads(gzip.decompress(path.read_bytes())))
        print(f"HF_ENDPOINT={hub.url}  ({len(hub.repos)} repos; Ctrl-C to stop)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main())
