"""A real OpenSSH server on 127.0.0.1 for the ssh runner's tests (Debian package openssh-server).

The server runs as the current user on a free port with a throwaway host key and user key; the
client checks the host key against a known_hosts file written here, as a user's would. StrictModes is
off (tmp folders are group/world readable) and, as root in CI, sshd needs its privilege-separation
folder /run/sshd. Without sshd the tests skip - unless APRON_REQUIRE_SSHD=1 (set by scripts/test.sh,
which installs openssh-server), where a missing server is a failure.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

SSHD_PATHS = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")


def sshd_path() -> str:
    for path in SSHD_PATHS:
        if os.path.exists(path):
            return path
    found = shutil.which("sshd")
    if found:
        return found
    message = "sshd is not installed: apt-get install -y openssh-server (scripts/test.sh does this in CI)"
    if os.environ.get("APRON_REQUIRE_SSHD") == "1":
        pytest.fail(message)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SshServer:
    def __init__(self, folder: Path):
        self.folder = folder
        self.port = _free_port()
        self.user = getpass.getuser()
        self.host_key = folder / "host_ed25519"
        self.user_key = folder / "id_ed25519"
        self.known_hosts = folder / "known_hosts"
        self.proc: subprocess.Popen | None = None

    @property
    def target(self) -> str:
        return f"ssh://{self.user}@127.0.0.1:{self.port}"

    def start(self) -> SshServer:
        sshd = sshd_path()
        self.folder.mkdir(parents=True, exist_ok=True)
        for key in (self.host_key, self.user_key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        (self.folder / "authorized_keys").write_text(self.user_key.with_suffix(".pub").read_text())
        host_pub = self.host_key.with_suffix(".pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n")
        config = self.folder / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.host_key}",
                    f"PidFile {self.folder / 'sshd.pid'}",
                    f"AuthorizedKeysFile {self.folder / 'authorized_keys'}",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "StrictModes no",
                    "PermitRootLogin prohibit-password",
                    "AllowTcpForwarding yes",
                    "MaxSessions 50",
                    "MaxStartups 50",
                    "LogLevel ERROR",
                    "",
                ]
            )
        )
        if os.geteuid() == 0:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation folder
        self._log = open(self.folder / "sshd.log", "wb")
        self.proc = subprocess.Popen(
            [sshd, "-D", "-e", "-f", str(config)], stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("sshd exited: " + (self.folder / "sshd.log").read_text())
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.1)
        raise RuntimeError("sshd did not listen within 20 s")

    def ssh_args(self) -> list[str]:
        return ["--identity", str(self.user_key), "--known-hosts", str(self.known_hosts)]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        if self.proc is not None:
            self._log.close()
