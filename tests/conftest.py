"""Shared test helpers: the real checkpoint snapshots, materialized as sparse safetensors folders."""

from __future__ import annotations

import functools
import gzip
import json
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SNAPSHOTS = FIXTURES / "checkpoints"
sys.path.insert(0, str(FIXTURES))

import materialize as _materialize  # noqa: E402  (tests/fixtures/materialize.py, standard library only)


def pytest_collection_modifyitems(config, items):
    """Tests that use the session `cpu_engine` run last: it holds engine_lock until the session ends, and
    tests that boot their own engine (marker `engine`) need the lock while no engine runs."""
    items.sort(key=lambda item: "cpu_engine" in getattr(item, "fixturenames", ()))


def snapshot_names() -> list[str]:
    return sorted(p.name[: -len(".json.gz")] for p in SNAPSHOTS.glob("*.json.gz"))


def snapshot_path(name: str) -> Path:
    return SNAPSHOTS / f"{name.replace('/', '--')}.json.gz"


@functools.cache
def loaded_snapshot(name: str):
    """The snapshot as a Checkpoint, read once per test process: the newest models' snapshots hold
    up to 120,000 tensors and take seconds to read. Callers must not change what they get."""
    from apron.checkpoint.snapshot import load_snapshot

    return load_snapshot(snapshot_path(name))


def snapshot_document(name: str) -> dict:
    return json.loads(gzip.decompress(snapshot_path(name).read_bytes()))


def materialize(name: str, out_dir: Path, **kwargs) -> Path:
    _materialize.materialize(snapshot_document(name), str(out_dir), **kwargs)
    return out_dir


@pytest.fixture
def apron_home(tmp_path, monkeypatch):
    """An empty Apron home so tests never read or write the user's cache and records."""
    home = tmp_path / "apron-home"
    monkeypatch.setenv("APRON_HOME", str(home))
    return home


@pytest.fixture
def apron_home_with_facts(tmp_path, monkeypatch):
    """An empty Apron home: plans read the engine facts shipped in the package."""
    monkeypatch.setenv("APRON_HOME", str(tmp_path / "apron-home"))
    from apron.engine import facts

    facts._load.cache_clear()
    return tmp_path / "apron-home"


HUB_TOKEN = "hf_test_accepted_token_0123456789"


@pytest.fixture
def hub(tmp_path, monkeypatch, apron_home):
    """A loopback Hub (tests/hub_server.py) that huggingface_hub and Apron talk to, with the library's
    cache in tmp, no token, fast retries and short timeouts."""
    from hub_server import HubServer

    with HubServer(tokens=(HUB_TOKEN,)) as server:
        point_hf_at(server.url, tmp_path / "hf-home", monkeypatch)
        monkeypatch.setenv("APRON_HUB_RETRY_BASE_SECONDS", "0.01")
        monkeypatch.setenv("APRON_HUB_RETRY_MAX_SECONDS", "0.05")
        monkeypatch.setenv("APRON_HUB_TIMEOUT_SECONDS", "5")
        yield server


def point_hf_at(endpoint: str, hf_home: Path, monkeypatch) -> None:
    """Set HF_ENDPOINT, HF_HOME and friends for this test.

    huggingface_hub reads these variables once, when it is first imported (constants.py), so setting
    the environment is not enough inside a pytest process that may have imported it already: the
    constants it derived are patched too. test_hub_env_variables_in_a_fresh_process checks that the
    plain variables alone work, as they do for a user.
    """
    from huggingface_hub import constants

    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "HF_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    # Every path the library derived from HF_HOME (cache, token, telemetry files) moves into tmp.
    home = constants.HF_HOME
    for name, value in vars(constants).items():
        if name.isupper() and isinstance(value, str) and value.startswith(home):
            monkeypatch.setattr(constants, name, str(hf_home) + value[len(home) :])
    patched = {
        "ENDPOINT": endpoint,
        "HUGGINGFACE_CO_URL_TEMPLATE": endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HUB_CACHE": str(hf_home / "hub"),
        "HF_TOKEN_PATH": str(hf_home / "token"),
        "HF_HUB_OFFLINE": False,
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": False,
    }
    for name, value in patched.items():
        monkeypatch.setattr(constants, name, value)


def serve_snapshot(hub, name: str, **kwargs):
    return hub.add_snapshot(snapshot_document(name), **kwargs)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """Tiny random-weight models built locally (scripts/make_tiny_model.py), one folder per variant."""
    from engine_env import build_tiny_model

    root = tmp_path_factory.mktemp("tiny-models")
    built: dict[str, Path] = {}

    def get(variant: str = "tiny", *options: str) -> Path:
        if variant not in built:
            built[variant] = build_tiny_model(root / variant, *options)
        return built[variant]

    return get


@pytest.fixture(scope="session")
def cpu_engine(tiny_models, tmp_path_factory):
    """One real vLLM CPU engine for the session, serving the tools-capable tiny model as 'tiny'
    (fast boot: eager, 64 MiB KV cache, one process; Hermes tool parser on; compact structured output,
    because vLLM's default JSON grammar allows whitespace between tokens and random weights repeat it
    until the token budget ends)."""
    from engine_env import COMPACT_JSON_ARGS, FAST_ARGS, Engine, engine_lock

    model = tiny_models("tiny-tools", "--tools")
    run_dir = tmp_path_factory.mktemp("engine")
    args = FAST_ARGS + ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"] + COMPACT_JSON_ARGS
    with engine_lock():
        engine = Engine(model, run_dir, args=args).start()
        try:
            if not engine.wait_healthy():
                pytest.fail("the CPU engine exited during start-up:\n" + engine.log_text()[-3000:])
            yield engine
        finally:
            engine.stop()


@pytest.fixture(scope="session")
def boot_pool(tmp_path_factory):
    """The records of the suite's real engine boots, gathered for the report tests (tests/report_env.py)."""
    from report_env import BootPool, pool_root

    return BootPool(pool_root(tmp_path_factory.mktemp("boot-pool")))


@pytest.fixture(scope="session")
def ssh_server(tmp_path_factory):
    """A real sshd on 127.0.0.1 (tests/ssh_env.py), for the ssh runner."""
    from ssh_env import SshServer

    server = SshServer(tmp_path_factory.mktemp("sshd")).start()
    try:
        yield server
    finally:
        server.stop()
