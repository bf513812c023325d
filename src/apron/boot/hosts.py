"""The machine a boot runs on, seen through one small interface: run a shell script, follow a file,
reach a port, receive a folder.

`LocalHost` runs `sh -c` here; `SshHost` runs the same scripts through the system OpenSSH client, so
the boot loop above them is one piece of code. Nothing here waits for a long-running remote command
to end before reading its output: a multi-megabyte output would fill the SSH channel window and
deadlock. Logs are followed by a reader thread that drains `tail -c +OFFSET -F` as it arrives.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from apron.errors import BadInput, HostFault
from apron.frozen import frozen


@frozen
class Result:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class LogFollower:
    """Bytes of a growing file, read from an offset as they arrive; `drain()` never blocks."""

    def drain(self) -> bytes:
        raise NotImplementedError

    @property
    def offset(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        pass


class FileFollower(LogFollower):
    def __init__(self, path: Path, offset: int = 0):
        self.path, self._offset = Path(path), offset

    @property
    def offset(self) -> int:
        return self._offset

    def drain(self) -> bytes:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return b""
        self._offset += len(data)
        return data


class StreamFollower(LogFollower):
    """Drains a process's stdout in a thread (`ssh host tail -c +N -F file`) and restarts it from the
    current offset when the connection drops, a bounded number of times."""

    def __init__(self, start: Callable[[int], subprocess.Popen[bytes]], offset: int = 0, max_restarts: int = 5) -> None:
        self._start, self._offset, self._max_restarts = start, offset, max_restarts
        self._chunks: list[bytes] = []
        self._lock = threading.Lock()
        self._closed = False
        self.error: str | None = None
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread.start()

    @property
    def offset(self) -> int:
        return self._offset

    def _pump(self) -> None:
        restarts = 0
        received = self._offset
        while not self._closed:
            self._proc = self._start(received)
            fd = _pipe(self._proc.stdout).fileno()
            while True:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                received += len(chunk)
                with self._lock:
                    self._chunks.append(chunk)
            code = self._proc.wait()
            if self._closed:
                return
            restarts += 1
            if restarts > self._max_restarts:
                self.error = f"log reader lost connection {restarts} times (last exit status {code})"
                return
            time.sleep(min(2.0 * restarts, 10))

    def drain(self) -> bytes:
        with self._lock:
            data, self._chunks = b"".join(self._chunks), []
        self._offset += len(data)
        return data

    def close(self) -> None:
        self._closed = True
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        self._thread.join(5)


class Host:
    """What the boot loop needs from a machine."""

    kind = "?"
    address = "?"

    def run(self, script: str, timeout: float = 120, stdin: bytes | None = None) -> Result:
        raise NotImplementedError

    def follow(self, path: str, offset: int = 0) -> LogFollower:
        raise NotImplementedError

    def forward(self, remote_port: int) -> str:
        """A base URL on this machine that reaches 127.0.0.1:remote_port on the target."""
        raise NotImplementedError

    def put_dir(self, local_dir: Path, remote_dir: str) -> str:
        """Make a local folder available on the target; returns its path there."""
        raise NotImplementedError

    def home_path(self, path: str) -> str:
        return path

    def close(self) -> None:
        pass


def _run(argv: list[str], timeout: float, stdin: bytes | None) -> Result:
    # communicate() reads stdout and stderr together while the command runs: no pipe can fill up.
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        return Result(
            124, out.decode(errors="replace"), err.decode(errors="replace") + f"\ntimed out after {timeout} s"
        )
    except BaseException:
        _kill_group(proc)
        raise
    return Result(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


class LocalHost(Host):
    kind = "local"
    address = "local"

    def run(self, script: str, timeout: float = 120, stdin: bytes | None = None) -> Result:
        return _run(["sh", "-c", script], timeout, stdin)

    def follow(self, path: str, offset: int = 0) -> LogFollower:
        return FileFollower(Path(path), offset)

    def forward(self, remote_port: int) -> str:
        return f"http://127.0.0.1:{remote_port}"

    def put_dir(self, local_dir: Path, remote_dir: str) -> str:
        return str(Path(local_dir).resolve())  # a local folder is used as is

    def home_path(self, path: str) -> str:
        return os.path.expanduser(path)


@frozen
class SshTarget:
    host: str
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    known_hosts_file: str | None = None
    options: tuple[str, ...] = ()  # extra `-o Key=Value` settings

    @property
    def destination(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host

    @property
    def address(self) -> str:
        port = f":{self.port}" if self.port else ""
        return f"ssh://{self.destination}{port}"


@frozen
class SshSettings:
    """How to reach any ssh target of a boot (--identity, --known-hosts, --ssh-option): given once, used
    for every ssh:// target and for a rented cluster's SSH entry."""

    identity_file: str | None = None
    known_hosts_file: str | None = None
    options: tuple[str, ...] = ()

    def target(self, host: str, user: str | None = None, port: int | None = None) -> SshTarget:
        return SshTarget(host, user, port, self.identity_file, self.known_hosts_file, self.options)


NO_SSH = SshSettings()


class SshHost(Host):
    """A machine reached with the system `ssh` client. Host keys are checked (StrictHostKeyChecking=yes
    against the user's known_hosts or --known-hosts FILE); the connection is never trusted blindly."""

    kind = "ssh"

    def __init__(self, target: SshTarget, connect_timeout_seconds: int = 20):
        self.target = target
        self.address = target.address
        self.connect_timeout_seconds = connect_timeout_seconds
        self._forwards: list[subprocess.Popen[bytes]] = []
        self._followers: list[LogFollower] = []

    def base_argv(self) -> list[str]:
        t = self.target
        argv = [
            "ssh",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"ConnectTimeout={self.connect_timeout_seconds}",
            "-o",
            "ServerAliveInterval=15",
            "-o",
            "ServerAliveCountMax=4",
            "-o",
            "LogLevel=ERROR",
        ]
        if t.port:
            argv += ["-p", str(t.port)]
        if t.identity_file:
            argv += ["-i", t.identity_file, "-o", "IdentitiesOnly=yes"]
        if t.known_hosts_file:
            argv += ["-o", f"UserKnownHostsFile={t.known_hosts_file}"]
        for option in t.options:
            argv += ["-o", option]
        return argv

    def _remote(self, script: str) -> list[str]:
        # The remote login shell runs `sh -c SCRIPT`: the same shell as LocalHost, whatever the user's shell.
        return self.base_argv() + [self.target.destination, "sh -c " + shlex.quote(script)]

    def run(self, script: str, timeout: float = 120, stdin: bytes | None = None) -> Result:
        return _run(self._remote(script), timeout, stdin)

    def check(self) -> None:
        """Fail early and clearly: bad credentials are bad input, an unreachable machine a host fault."""
        result = self.run("true", timeout=self.connect_timeout_seconds + 10)
        if result.ok:
            return
        message = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else f"exit {result.exit_code}"
        if (
            "Permission denied" in result.stderr
            or "Host key verification failed" in result.stderr
            or "REMOTE HOST IDENTIFICATION HAS CHANGED" in result.stderr
        ):
            raise BadInput(f"{self.address}: {message} (check --identity and --known-hosts)")
        raise HostFault(f"{self.address}: cannot connect: {message}")

    def follow(self, path: str, offset: int = 0) -> LogFollower:
        def start(from_offset: int) -> subprocess.Popen[bytes]:
            script = f"exec tail -c +{from_offset + 1} -F {shlex.quote(path)} 2>/dev/null"
            return subprocess.Popen(
                self._remote(script),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )

        follower = StreamFollower(start, offset)
        self._followers.append(follower)
        return follower

    def forward(self, remote_port: int) -> str:
        local_port = _free_port()
        argv = self.base_argv() + [
            "-N",
            "-o",
            "ExitOnForwardFailure=yes",
            "-L",
            f"127.0.0.1:{local_port}:127.0.0.1:{remote_port}",
            self.target.destination,
        ]
        # stderr to a file, not a pipe: ssh reports every refused channel while the engine starts,
        # and a pipe nobody reads would fill up and stall the tunnel.
        errors = tempfile.TemporaryFile()
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True
        )
        self._forwards.append(proc)
        deadline = time.monotonic() + self.connect_timeout_seconds + 10
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                errors.seek(0)
                raise HostFault(
                    f"{self.address}: port forward failed: {errors.read().decode(errors='replace').strip()}"
                )
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", local_port)) == 0:
                    return f"http://127.0.0.1:{local_port}"
            time.sleep(0.1)
        raise HostFault(f"{self.address}: port forward to {remote_port} did not come up")

    def put_dir(self, local_dir: Path, remote_dir: str) -> str:
        """tar over ssh: one stream, read by the remote tar as it arrives."""
        local_dir = Path(local_dir).resolve()
        target = f"{remote_dir.rstrip('/')}/{local_dir.name}"
        script = (
            f"rm -rf {shlex.quote(target)} && mkdir -p {shlex.quote(remote_dir)} && "
            f"tar -C {shlex.quote(remote_dir)} -xf -"
        )
        tar = subprocess.Popen(
            ["tar", "-C", str(local_dir.parent), "-cf", "-", local_dir.name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        ssh = subprocess.Popen(
            self._remote(script),
            stdin=tar.stdout,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        _pipe(tar.stdout).close()
        _, err = ssh.communicate()
        tar.wait()
        if ssh.returncode != 0 or tar.returncode != 0:
            tar_err = _pipe(tar.stderr).read().decode(errors="replace").strip()
            message = err.decode(errors="replace").strip() or tar_err
            exc = HostFault if ssh.returncode == 255 else RuntimeError
            raise exc(f"copying {local_dir} to {self.address}:{target} failed: {message}")
        return target

    def close(self) -> None:
        for follower in self._followers:
            follower.close()
        for proc in self._forwards:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
        self._forwards.clear()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pipe(stream: IO[bytes] | None) -> IO[bytes]:
    """A stream Popen opened with PIPE (None only when it was not asked for)."""
    if stream is None:
        raise RuntimeError("the subprocess was started without this pipe")
    return stream
