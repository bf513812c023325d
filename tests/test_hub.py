"""The Hub path against a real HTTP server on 127.0.0.1 (tests/hub_server.py): same tensors as the
snapshot, the commit pinned, header bytes only, concurrency, the header cache, and every fault."""

from __future__ import annotations

import re
import struct
import time

import pytest

from apron.checkpoint import hub_cache, load_checkpoint
from apron.checkpoint.hub import load_hub
from apron.checkpoint.hub_http import HubSettings
from apron.checkpoint.local import load_local
from apron.checkpoint.snapshot import load_snapshot
from apron.errors import BadInput, Failed
from conftest import HUB_TOKEN, serve_snapshot, snapshot_document, snapshot_path

SECRET = "hf_secret_value_that_must_never_be_printed"
CONFIG = b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}'


def rows(checkpoint):
    return sorted((t.name, t.dtype, t.shape, t.file) for t in checkpoint.tensors)


def shard_paths(hub, server="cdn"):
    return [s for s in hub.log if s.server == server and s.path.split("?")[0].endswith(".safetensors")]


def one_line(exc) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


# --- same answer as the snapshot ----------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "Qwen/Qwen3-0.6B",
        "Qwen/Qwen3-8B",
        "mistralai/Mistral-7B-Instruct-v0.3",
        "deepseek-ai/DeepSeek-V2-Lite",
        "openai/gpt-oss-20b",
        "state-spaces/mamba-2.8b-hf",
        "Qwen/Qwen3-8B-AWQ",
        "Qwen/Qwen3.6-35B-A3B-FP8",  # 9 MB of headers: each arrives in many chunks
    ],
)
def test_hub_gives_the_snapshot_tensors(hub, name):
    repo = serve_snapshot(hub, name)
    from_hub = load_hub(name)
    from_snapshot = load_snapshot(snapshot_path(name))
    assert rows(from_hub) == rows(from_snapshot)
    assert sorted(from_hub.files) == sorted(from_snapshot.files)
    assert from_hub.config == from_snapshot.config
    assert from_hub.total_tensor_bytes == snapshot_document(name)["checks"]["total_bytes"]
    assert (from_hub.source_kind, from_hub.repo_id, from_hub.revision) == ("hub", name, repo.sha)


@pytest.mark.parametrize("revision", [None, "main", "v1.0", "first-ten"])
def test_revision_comes_back_as_the_commit_sha(hub, revision):
    repo = serve_snapshot(hub, "Qwen/Qwen3-0.6B", refs=("main", "v1.0"))
    wanted = repo.sha[:10] if revision == "first-ten" else revision
    checkpoint = load_hub("Qwen/Qwen3-0.6B", wanted)
    assert checkpoint.revision == repo.sha
    assert len(checkpoint.revision) == 40
    requested = {s.path.split("?")[0] for s in hub.requests("/resolve/")}
    assert all(f"/resolve/{repo.sha}/" in path for path in requested)  # every file read at the pinned commit


def test_config_companions_come_through(hub):
    extra = {
        "generation_config.json": b'{"temperature": 0.6}',
        "tokenizer_config.json": b'{"chat_template": "{{ messages }}"}',
        "chat_template.jinja": b"{% for m in messages %}{{ m.content }}{% endfor %}",
    }
    serve_snapshot(hub, "Qwen/Qwen3-0.6B", extra_files=extra)
    checkpoint = load_hub("Qwen/Qwen3-0.6B")
    assert checkpoint.generation_config == {"temperature": 0.6}
    assert checkpoint.tokenizer_config == {"chat_template": "{{ messages }}"}
    assert checkpoint.chat_template == extra["chat_template.jinja"].decode()  # the .jinja file wins, as in vLLM


# --- header bytes only --------------------------------------------------------------------------


def test_reads_only_header_bytes(hub, capsys):
    repo = serve_snapshot(hub, "Qwen/Qwen3-32B")
    checkpoint = load_hub("Qwen/Qwen3-32B")
    shards = [vf for name, vf in repo.files.items() if name.endswith(".safetensors")]
    header_bytes = sum(len(vf.prefix) for vf in shards)  # 8 + N per shard: the header-only file
    file_bytes = sum(vf.size for vf in shards)
    config_bytes = sum(vf.size for name, vf in repo.files.items() if not name.endswith(".safetensors"))
    served_shards = hub.bytes_sent_where(lambda p: p.endswith(".safetensors"))
    served_files = hub.bytes_sent_where(lambda p: not p.startswith("/api/"))
    assert len(shards) == 17
    assert served_shards <= 1.05 * header_bytes
    assert served_files <= 1.05 * header_bytes + config_bytes
    assert checkpoint.header_bytes_read == header_bytes + config_bytes
    assert len(shard_paths(hub)) == 2 * 17  # the 8-byte length, then the header, per shard
    with capsys.disabled():
        print(
            f"\n[hub bytes] Qwen/Qwen3-32B: {len(shards)} shards, {file_bytes:,} bytes of files; served "
            f"{served_shards:,} bytes of safetensors for {header_bytes:,} bytes of 8 + header; "
            f"{config_bytes:,} bytes of config/index"
        )


def test_unindexed_consolidated_file_is_never_requested(hub):
    serve_snapshot(hub, "mistralai/Mistral-7B-Instruct-v0.3")
    checkpoint = load_hub("mistralai/Mistral-7B-Instruct-v0.3")
    assert "consolidated.safetensors" not in checkpoint.files
    assert hub.requests("consolidated") == []
    assert checkpoint.total_tensor_bytes == 14_496_047_104


def test_shards_are_fetched_concurrently(hub):
    serve_snapshot(hub, "Qwen/Qwen3-32B")
    hub.fault(".safetensors", "slow", delay_seconds=0.15, times=None, server="cdn")
    started = time.monotonic()
    load_hub("Qwen/Qwen3-32B")
    elapsed = time.monotonic() - started
    serial_seconds = 17 * 2 * 0.15
    assert hub.max_in_flight >= 4
    assert elapsed < serial_seconds / 2


# --- the header cache ---------------------------------------------------------------------------


def test_second_plan_of_a_commit_sends_no_header_requests(hub, apron_home):
    repo = serve_snapshot(hub, "Qwen/Qwen3-8B")
    first = load_hub("Qwen/Qwen3-8B")
    assert (apron_home / "cache" / "hub-headers" / "Qwen--Qwen3-8B" / repo.sha / "listing.json").is_file()
    hub.reset_counts()
    second = load_hub("Qwen/Qwen3-8B")  # a branch name: one model-info call to see where it points now
    assert rows(second) == rows(first)
    assert shard_paths(hub, "hub") == shard_paths(hub, "cdn") == []
    assert [s.path.split("?")[0] for s in hub.log] == ["/api/models/Qwen/Qwen3-8B"]
    assert second.extra["hub"]["header_cache_hits"] == 5
    hub.reset_counts()
    third = load_hub("Qwen/Qwen3-8B", repo.sha)  # a commit sha: nothing to ask the server at all
    assert rows(third) == rows(first)
    assert hub.log == []


# --- access errors ------------------------------------------------------------------------------


def test_gated_repo_without_token_says_how_to_pass_one(hub):
    serve_snapshot(hub, "meta-llama/Llama-3.1-8B-Instruct", gated=True)
    with pytest.raises(BadInput) as exc:
        load_hub("meta-llama/Llama-3.1-8B-Instruct")
    message = one_line(exc)
    assert "meta-llama/Llama-3.1-8B-Instruct" in message and "gated" in message
    assert "HF_TOKEN" in message and "hf auth login" in message
    assert exc.value.exit_code == 2


def test_gated_repo_with_a_token_lacking_access_never_prints_it(hub, monkeypatch):
    serve_snapshot(hub, "meta-llama/Llama-3.1-8B-Instruct", gated=True)
    monkeypatch.setenv("HF_TOKEN", SECRET)
    with pytest.raises(BadInput) as exc:
        load_hub("meta-llama/Llama-3.1-8B-Instruct")
    message = one_line(exc)
    assert "HF_TOKEN" in message and "403" in message
    assert SECRET not in message and SECRET[:12] not in message


def test_private_repo_401_names_the_token_variable_not_its_value(hub, monkeypatch):
    serve_snapshot(hub, "Qwen/Qwen3-0.6B", repo_id="acme/private-model", private=True)
    monkeypatch.setenv("HF_TOKEN", SECRET)
    with pytest.raises(BadInput) as exc:
        load_hub("acme/private-model")
    message = one_line(exc)
    assert "401" in message and "acme/private-model" in message
    assert "HF_TOKEN" in message and "no local folder" in message
    assert SECRET not in message


def test_accepted_token_is_sent_to_the_hub_but_not_to_the_cdn(hub, monkeypatch):
    serve_snapshot(hub, "meta-llama/Llama-3.1-8B-Instruct", gated=True)
    monkeypatch.setenv("HF_TOKEN", HUB_TOKEN)
    checkpoint = load_hub("meta-llama/Llama-3.1-8B-Instruct")
    assert len(checkpoint.files) == 4
    assert all(
        s.headers.get("authorization") == f"Bearer {HUB_TOKEN}"
        for s in hub.requests(server="hub")
        if not s.path.startswith("/api/agent")
    )
    cdn = hub.requests(server="cdn")
    assert cdn and all("authorization" not in s.headers for s in cdn)
    assert all("range" in s.headers for s in cdn)  # Range survived the redirect


# --- not found ----------------------------------------------------------------------------------


def test_missing_repo(hub):
    with pytest.raises(BadInput) as exc:
        load_hub("nobody/no-such-model")
    message = one_line(exc)
    assert "nobody/no-such-model" in message and "404" in message and "no local folder" in message


def test_missing_repo_as_anonymous_callers_see_it(hub):
    hub.unknown_repo_status = 401  # the real Hub does not say whether a repo exists to anonymous callers
    with pytest.raises(BadInput) as exc:
        load_hub("nobody/no-such-model")
    message = one_line(exc)
    assert "does not exist" in message and "HF_TOKEN" in message and "no local folder" in message


def test_missing_revision(hub):
    serve_snapshot(hub, "Qwen/Qwen3-0.6B")
    with pytest.raises(BadInput) as exc:
        load_hub("Qwen/Qwen3-0.6B", "no-such-branch")
    message = one_line(exc)
    assert "Qwen/Qwen3-0.6B" in message and "no-such-branch" in message


def test_index_naming_a_missing_shard(hub):
    index = b'{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}'
    hub.add_repo(
        "acme/broken",
        {
            "config.json": CONFIG,
            "model.safetensors.index.json": index,
            "model-00001-of-00002.safetensors": _shard({"a": [4]}),
        },
    )
    with pytest.raises(BadInput) as exc:
        load_hub("acme/broken")
    assert "model-00002-of-00002.safetensors" in one_line(exc)


def test_shard_vanishing_between_listing_and_fetch(hub):
    serve_snapshot(hub, "Qwen/Qwen3-8B")
    hub.fault("model-00002-of-00005", status=404, times=None, server="hub")
    with pytest.raises(BadInput) as exc:
        load_hub("Qwen/Qwen3-8B")
    message = one_line(exc)
    assert "model-00002-of-00005.safetensors" in message and "404" in message


def test_repo_without_config_or_safetensors(hub):
    hub.add_repo("acme/no-config", {"model.safetensors": _shard({"a": [4]})})
    hub.add_repo("acme/bin-only", {"config.json": CONFIG, "pytorch_model.bin": b"\0" * 16})
    with pytest.raises(BadInput, match="no config.json"):
        load_hub("acme/no-config")
    with pytest.raises(BadInput, match=r"no \*\.safetensors"):
        load_hub("acme/bin-only")


def test_invalid_repo_id_is_bad_input(hub):
    with pytest.raises(BadInput):
        load_hub("a/b/c")


# --- transient faults ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        dict(match="model-00003-of-00005", status=503, times=2, server="cdn"),
        dict(match="model-00003-of-00005", status=500, times=1, server="hub"),
        dict(match="/api/models/", status=502, times=2),
        dict(match="model-00003-of-00005", kind="reset", times=2, server="cdn"),
        dict(match="model-00003-of-00005", kind="cut", times=1, server="cdn"),
        dict(match="model-00003-of-00005", kind="slow", delay_seconds=6.0, times=1, server="cdn"),
        dict(match="config.json", status=503, times=1, method="HEAD"),
        dict(match="config.json", status=503, times=2, method="GET"),
        dict(match="config.json", kind="reset", times=1, method="GET"),
    ],
    ids=[
        "503-twice",
        "500-on-resolve",
        "502-on-model-info",
        "reset",
        "cut-body",
        "timeout",
        "config-head-503",
        "config-get-503",
        "config-get-reset",
    ],
)
def test_transient_faults_are_retried(hub, monkeypatch, fault):
    # Short enough that the slow answer (6 s) times out, long enough that a loaded 2-core machine
    # answers every other request in time (0.3 s made untouched requests time out and retry).
    monkeypatch.setenv("APRON_HUB_TIMEOUT_SECONDS", "3")
    serve_snapshot(hub, "Qwen/Qwen3-8B")
    injected = hub.fault(**fault)
    checkpoint = load_hub("Qwen/Qwen3-8B")
    assert injected.hits == fault["times"]
    if "config" not in fault["match"]:  # config files go through huggingface_hub, not the header counters
        assert checkpoint.extra["hub"]["retries"] == fault["times"]
    assert rows(checkpoint) == rows(load_snapshot(snapshot_path("Qwen/Qwen3-8B")))


def test_429_retry_after_is_honoured(hub):
    serve_snapshot(hub, "Qwen/Qwen3-0.6B")
    hub.fault("model.safetensors", status=429, retry_after="1", times=1, server="cdn")
    started = time.monotonic()
    checkpoint = load_hub("Qwen/Qwen3-0.6B")
    assert time.monotonic() - started >= 1.0
    assert checkpoint.extra["hub"]["retries"] == 1


def test_retries_exhausted_is_failed(hub, monkeypatch):
    monkeypatch.setenv("APRON_HUB_MAX_ATTEMPTS", "3")
    serve_snapshot(hub, "Qwen/Qwen3-8B")
    hub.fault("model-00002-of-00005", status=503, times=None, server="cdn")
    with pytest.raises(Failed) as exc:
        load_hub("Qwen/Qwen3-8B")
    message = one_line(exc)
    assert exc.value.exit_code == 1
    assert "model-00002-of-00005.safetensors" in message and "503" in message and "3 attempt(s)" in message
    assert len([s for s in shard_paths(hub) if "model-00002" in s.path]) == 3


def test_model_info_retries_exhausted_is_failed(hub, monkeypatch):
    monkeypatch.setenv("APRON_HUB_MAX_ATTEMPTS", "2")
    serve_snapshot(hub, "Qwen/Qwen3-8B")
    hub.fault("/api/models/", status=500, times=None)
    with pytest.raises(Failed) as exc:
        load_hub("Qwen/Qwen3-8B")
    assert "Qwen/Qwen3-8B" in one_line(exc) and "500" in one_line(exc)


def test_resets_exhausted_is_failed(hub, monkeypatch):
    monkeypatch.setenv("APRON_HUB_MAX_ATTEMPTS", "2")
    serve_snapshot(hub, "Qwen/Qwen3-0.6B")
    hub.fault("model.safetensors", kind="reset", times=None, server="cdn")
    with pytest.raises(Failed) as exc:
        load_hub("Qwen/Qwen3-0.6B")
    assert "model.safetensors" in one_line(exc)


def test_timeouts_exhausted_is_failed(hub, monkeypatch):
    monkeypatch.setenv("APRON_HUB_MAX_ATTEMPTS", "2")
    monkeypatch.setenv("APRON_HUB_TIMEOUT_SECONDS", "0.2")
    serve_snapshot(hub, "Qwen/Qwen3-0.6B")
    hub.fault("model.safetensors", kind="slow", delay_seconds=0.6, times=None, server="cdn")
    with pytest.raises(Failed) as exc:
        load_hub("Qwen/Qwen3-0.6B")
    assert "within 0.2 s" in one_line(exc)


def test_retry_after_beyond_the_limit_fails_at_once(hub):
    serve_snapshot(hub, "Qwen/Qwen3-0.6B")
    hub.fault("model.safetensors", status=429, retry_after="3600", times=None, server="cdn")
    started = time.monotonic()
    with pytest.raises(Failed) as exc:
        load_hub("Qwen/Qwen3-0.6B")
    assert time.monotonic() - started < 5
    assert "429" in one_line(exc)
    assert len(shard_paths(hub)) == 1


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://127.0.0.1:9",  # the discard port: nothing listens, the connection is refused
        "http://hub.invalid",  # RFC 6761: a name that never resolves
    ],
)
def test_unreachable_endpoint_fails_at_once(hub, monkeypatch, tmp_path, endpoint):
    """No network (or a wrong HF_ENDPOINT) is not transient: one attempt, one line, no backoff."""
    from conftest import point_hf_at

    point_hf_at(endpoint, tmp_path / "hf-elsewhere", monkeypatch)
    monkeypatch.setenv("APRON_HUB_MAX_ATTEMPTS", "5")
    monkeypatch.setenv("APRON_HUB_RETRY_BASE_SECONDS", "1")  # a retry would show in the time taken
    started = time.monotonic()
    with pytest.raises(Failed) as exc:
        load_hub("Qwen/Qwen3-0.6B")
    assert time.monotonic() - started < 1.0
    assert f"cannot reach {endpoint}" in one_line(exc) and "attempt" not in one_line(exc)


# --- a server that ignores Range ----------------------------------------------------------------


def test_server_ignoring_range_is_read_only_up_to_the_header(hub):
    repo = serve_snapshot(hub, "Qwen/Qwen3-8B")
    hub.ignore_range = True
    checkpoint = load_hub("Qwen/Qwen3-8B")
    assert rows(checkpoint) == rows(load_snapshot(snapshot_path("Qwen/Qwen3-8B")))
    names = [name for name in repo.files if name.endswith(".safetensors")]
    assert checkpoint.extra["hub"]["range_ignored_files"] == sorted(names)
    assert len(shard_paths(hub)) == len(names)  # one request each: the header is read from the same stream
    assert any("ignored Range" in note for note in checkpoint.notes)
    for name in names:
        sent = hub.bytes_sent_where(lambda p, n=name: p.endswith(n))
        assert sent < len(repo.files[name].prefix) + 32 * 2**20  # socket buffers, not the file
        assert sent < repo.files[name].size / 50


# --- corrupt headers: the same messages as local files ------------------------------------------


@pytest.mark.parametrize(
    "raw, expected",
    [
        (struct.pack("<Q", 16) + b'{"a": not json} ', "not valid JSON"),
        (struct.pack("<Q", 10**6) + b"{}      ", "runs past the end of the file"),
        (struct.pack("<Q", 2 * 10**8) + b"{}      ", "over the 100 MB limit"),
        (b"\x05\x00\x00", "8-byte header length is missing"),
        (struct.pack("<Q", 8) + b'{"a": 1}', "must be an object with dtype"),
    ],
)
def test_corrupt_header_gives_the_local_message(hub, tmp_path, raw, expected):
    hub.add_repo("acme/corrupt", {"config.json": CONFIG, "model.safetensors": raw})
    with pytest.raises(BadInput) as from_hub:
        load_hub("acme/corrupt")
    folder = tmp_path / "local"
    folder.mkdir()
    (folder / "config.json").write_bytes(CONFIG)
    (folder / "model.safetensors").write_bytes(raw)
    with pytest.raises(BadInput) as from_folder:
        load_local(folder)
    hub_message, local_message = one_line(from_hub), one_line(from_folder)
    assert expected in hub_message
    assert "acme/corrupt/model.safetensors" in hub_message
    assert hub_message.split("): ", 1)[1] == local_message.split(f"{folder / 'model.safetensors'}: ", 1)[1]
    sha = hub.repos["acme/corrupt"].sha
    assert hub_cache.read_header("acme/corrupt", sha, "model.safetensors") is None  # never cached


# --- offline ------------------------------------------------------------------------------------


def test_offline_uses_cached_headers(hub, monkeypatch):
    from huggingface_hub import constants

    repo = serve_snapshot(hub, "Qwen/Qwen3-8B")
    online = load_hub("Qwen/Qwen3-8B")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    hub.reset_counts()
    offline = load_hub("Qwen/Qwen3-8B")
    assert rows(offline) == rows(online)
    assert offline.revision == repo.sha
    assert [s for s in hub.log if not s.path.startswith("/api/agent")] == []


def test_offline_without_cache_is_bad_input(hub, monkeypatch):
    from huggingface_hub import constants

    serve_snapshot(hub, "Qwen/Qwen3-8B")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(BadInput) as exc:
        load_hub("Qwen/Qwen3-8B")
    message = one_line(exc)
    assert "HF_HUB_OFFLINE" in message and "Qwen/Qwen3-8B" in message


def test_offline_with_headers_missing_from_cache(hub, monkeypatch, apron_home):
    from huggingface_hub import constants

    repo = serve_snapshot(hub, "Qwen/Qwen3-8B")
    load_hub("Qwen/Qwen3-8B")
    for path in (hub_cache.repo_dir("Qwen/Qwen3-8B") / repo.sha / "headers").iterdir():
        path.unlink()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(BadInput) as exc:
        load_hub("Qwen/Qwen3-8B")
    assert "no headers for 5 of 5 shard(s)" in one_line(exc)


# --- progress -----------------------------------------------------------------------------------


def test_progress_lines_on_stderr(hub, capsys):
    serve_snapshot(hub, "Qwen/Qwen3-8B")
    load_hub("Qwen/Qwen3-8B", settings=HubSettings(progress=True))
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "apron: read 5/5 safetensors headers of Qwen/Qwen3-8B" in captured.err


def test_no_progress_when_stderr_is_not_a_terminal(hub, capsys):
    serve_snapshot(hub, "Qwen/Qwen3-8B")
    load_hub("Qwen/Qwen3-8B")
    assert "safetensors headers" not in capsys.readouterr().err


# --- helpers ------------------------------------------------------------------------------------


def _shard(shapes: dict[str, list[int]]) -> bytes:
    """A small real safetensors file (F32 tensors, data as zeros)."""
    import json

    header, offset = {}, 0
    for name, shape in shapes.items():
        size = 4
        for dim in shape:
            size *= dim
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + bytes(offset)


def test_server_ignoring_range_on_the_header_request(hub):
    serve_snapshot(hub, "Qwen/Qwen3-8B")
    hub.fault(".safetensors", "ignore_range", range_prefix="bytes=8-", times=None, server="cdn")
    checkpoint = load_hub("Qwen/Qwen3-8B")
    assert rows(checkpoint) == rows(load_snapshot(snapshot_path("Qwen/Qwen3-8B")))
    assert len(checkpoint.extra["hub"]["range_ignored_files"]) == 5


# --- routing: catalog first, then the Hub -------------------------------------------------------


def test_catalog_answers_first_without_the_network(hub):
    serve_snapshot(hub, "Qwen/Qwen3-8B")
    checkpoint = load_checkpoint("Qwen/Qwen3-8B")
    assert checkpoint.source_kind == "catalog"
    assert load_checkpoint("Qwen/Qwen3-8B", checkpoint.revision).source_kind == "catalog"
    assert hub.log == []


@pytest.mark.parametrize("how", ["use_catalog=False", "other revision", "not in catalog"])
def test_hub_when_the_catalog_does_not_apply(hub, how):
    name = "Qwen/Qwen3-1.7B" if how == "not in catalog" else "Qwen/Qwen3-8B"
    repo = serve_snapshot(hub, name)
    if how == "use_catalog=False":
        checkpoint = load_checkpoint(name, use_catalog=False)
    else:
        checkpoint = load_checkpoint(name, "main" if how == "other revision" else None)
    assert (checkpoint.source_kind, checkpoint.revision) == ("hub", repo.sha)
    assert shard_paths(hub)


# --- the real environment variables, in a fresh process -----------------------------------------


def test_hub_env_variables_in_a_fresh_process(hub, tmp_path):
    """HF_ENDPOINT, HF_HOME, HF_TOKEN, a stored token and HF_HUB_OFFLINE as a user sets them: no
    patched constants, the library reads them at import as it does in `apron plan`."""
    import os
    import shutil
    import subprocess
    import sys

    repo = serve_snapshot(hub, "Qwen/Qwen3-0.6B", repo_id="acme/private-model", private=True)
    hf_home, apron_cache = tmp_path / "fresh-hf", tmp_path / "fresh-apron"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "HUGGING"))}
    env.update(HF_ENDPOINT=hub.url, HF_HOME=str(hf_home), APRON_HOME=str(apron_cache))
    code = (
        "import sys\nfrom apron.errors import ApronError\nfrom apron.checkpoint import load_checkpoint\n"
        "try:\n    c = load_checkpoint('acme/private-model')\n"
        "except ApronError as e:\n    sys.exit(f'error {e.exit_code}: {e}')\n"
        "print(c.source_kind, c.revision, len(c.tensors))"
    )

    def run(**extra) -> tuple[list[str], str]:
        done = subprocess.run(
            [sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True, timeout=120
        )
        return done.stdout.split(), done.stderr

    expected = ["hub", repo.sha, str(len(load_snapshot(snapshot_path("Qwen/Qwen3-0.6B")).tensors))]
    assert run(HF_TOKEN=HUB_TOKEN)[0] == expected
    shutil.rmtree(apron_cache)
    (hf_home / "token").write_text(HUB_TOKEN)  # where `hf auth login` stores the token
    assert run()[0] == expected
    hub.reset_counts()
    assert run(HF_HUB_OFFLINE="1")[0] == expected
    assert hub.log == []
    (hf_home / "token").unlink()
    shutil.rmtree(apron_cache)
    out, err = run(HF_TOKEN=SECRET)
    assert out == [] and err.startswith("error 2: ") and "HF_TOKEN" in err and SECRET not in err


def test_local_plan_does_not_import_huggingface_hub(tmp_path):
    import subprocess
    import sys

    from conftest import materialize

    folder = materialize("Qwen/Qwen3-0.6B", tmp_path / "q")
    code = (
        f"import sys; from apron.checkpoint import load_checkpoint; load_checkpoint({str(folder)!r}); "
        "print([m for m in ('huggingface_hub', 'httpx2', 'torch', 'transformers') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_config_download_failing_for_good_is_failed(hub, monkeypatch):
    monkeypatch.setenv("APRON_HUB_MAX_ATTEMPTS", "2")
    serve_snapshot(hub, "Qwen/Qwen3-8B")
    hub.fault("config.json", status=503, times=None, method="GET")
    with pytest.raises(Failed) as exc:
        load_hub("Qwen/Qwen3-8B")
    assert "file 'config.json'" in one_line(exc) and "503" in one_line(exc)


# --- settings -----------------------------------------------------------------------------------


def test_settings_from_env(monkeypatch):
    monkeypatch.setenv("APRON_HUB_TIMEOUT_SECONDS", "2.5")
    monkeypatch.setenv("APRON_HUB_MAX_ATTEMPTS", "3")
    monkeypatch.setenv("APRON_HUB_WORKERS", "16")
    settings = HubSettings.from_env()
    assert (settings.timeout_seconds, settings.max_attempts, settings.max_workers) == (2.5, 3, 16)
    monkeypatch.setenv("APRON_HUB_MAX_ATTEMPTS", "many")
    with pytest.raises(BadInput, match="APRON_HUB_MAX_ATTEMPTS"):
        HubSettings.from_env()
    monkeypatch.setenv("APRON_HUB_MAX_ATTEMPTS", "0")
    with pytest.raises(BadInput, match="below 1"):
        HubSettings.from_env()


def test_backoff_is_exponential_and_capped():
    settings = HubSettings(retry_base_seconds=0.5, retry_max_seconds=4)
    delays = [settings.backoff_seconds(attempt) for attempt in range(1, 7)]
    for delay, base in zip(delays, [0.5, 1, 2, 4, 4, 4], strict=True):
        assert base <= delay <= base * 1.1


def test_retry_after_forms():
    from email.utils import formatdate

    from apron.checkpoint.hub_http import retry_after_seconds

    assert retry_after_seconds({"Retry-After": "7"}) == 7
    assert retry_after_seconds({"Retry-After": "1.5"}) == 1.5
    assert 25 <= retry_after_seconds({"Retry-After": formatdate(time.time() + 30, usegmt=True)}) <= 31
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_broken_config_fails_before_any_shard_is_fetched(hub):
    hub.add_repo("acme/bad-config", {"config.json": b'{"architectures": ', "model.safetensors": _shard({"a": [4]})})
    with pytest.raises(BadInput, match=r"acme/bad-config/config.json: invalid JSON"):
        load_hub("acme/bad-config")
    assert shard_paths(hub) == shard_paths(hub, "hub") == []


def test_answer_that_is_not_file_bytes_is_failed(hub):
    serve_snapshot(hub, "Qwen/Qwen3-0.6B")
    hub.fault("model.safetensors", status=304, times=None, server="cdn")
    with pytest.raises(Failed, match="HTTP 304 to a Range request"):
        load_hub("Qwen/Qwen3-0.6B")


# --- a Hub that accepts the connection and never answers --------------------------------------


class SilentServer:
    """Accepts every connection and never sends a byte: a stalled proxy, a Hub under maintenance."""

    def __init__(self):
        import socket
        import threading

        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self.connections: list = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self.connections.append(connection)  # held open, never answered

    def close(self) -> None:
        self._socket.close()
        for connection in self.connections:
            connection.close()


def test_a_hub_that_never_answers_gives_one_line_within_the_budget(monkeypatch, tmp_path, apron_home):
    """Timeouts are retried only while another try still ends within APRON_HUB_TIMEOUT_BUDGET_SECONDS
    (the default, 25 s with 10 s a try, makes it two tries and one line within 30 s)."""
    from conftest import point_hf_at

    silent = SilentServer()
    try:
        point_hf_at(silent.url, tmp_path / "hf-silent", monkeypatch)
        monkeypatch.setenv("APRON_HUB_TIMEOUT_SECONDS", "1")
        monkeypatch.setenv("APRON_HUB_TIMEOUT_BUDGET_SECONDS", "2.5")
        monkeypatch.setenv("APRON_HUB_MAX_ATTEMPTS", "5")
        monkeypatch.setenv("APRON_HUB_RETRY_BASE_SECONDS", "0.01")
        started = time.monotonic()
        with pytest.raises(Failed) as exc:
            load_hub("Qwen/Qwen3-0.6B")
        elapsed = time.monotonic() - started
    finally:
        silent.close()
    message = one_line(exc)
    assert f"the Hub at {silent.url} did not answer within 1 s on" in message and silent.connections
    tries = int(re.search(r"on (\d) attempt\(s\)", message).group(1))  # type: ignore[union-attr]
    assert 1 <= tries <= 2  # not the 5 attempts allowed: a third try would end past the budget
    assert elapsed < 2.5 + 1.5  # the first try also pays for importing huggingface_hub


def test_default_timeouts_fit_in_thirty_seconds():
    """The defaults: a second try of 10 s still ends within the 25 s budget, a third never does."""
    settings = HubSettings()
    first_try_ends = settings.timeout_seconds
    second = first_try_ends + settings.backoff_seconds(1) + settings.timeout_seconds
    third = second + settings.backoff_seconds(2) + settings.timeout_seconds
    assert second <= settings.timeout_budget_seconds < third and settings.timeout_budget_seconds < 30


def test_headers_that_never_come_give_one_line_within_the_budget(hub, monkeypatch):
    monkeypatch.setenv("APRON_HUB_TIMEOUT_SECONDS", "1")
    monkeypatch.setenv("APRON_HUB_TIMEOUT_BUDGET_SECONDS", "2.5")
    monkeypatch.setenv("APRON_HUB_MAX_ATTEMPTS", "5")
    serve_snapshot(hub, "Qwen/Qwen3-0.6B")
    # Longer than every try and shorter than the teardown should wait for the server's threads.
    hub.fault("model.safetensors", kind="slow", delay_seconds=4.0, times=None, server="cdn")
    started = time.monotonic()
    with pytest.raises(Failed) as exc:
        load_hub("Qwen/Qwen3-0.6B")
    assert time.monotonic() - started < 2.5 + 2.0
    assert "model.safetensors" in one_line(exc) and "did not answer within 1 s" in one_line(exc)
