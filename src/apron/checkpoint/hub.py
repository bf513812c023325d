"""A Hub repo id -> Checkpoint, reading config files and safetensors headers only.

The steps, each a function below:
1. Pin the revision: one model-info call gives the commit sha and the file list (with sizes).
2. Config files (config.json, generation/tokenizer configs, chat template, the safetensors index)
   go through huggingface_hub's normal download and cache, pinned to that sha.
3. The shards vLLM would load (the index's weight_map, else every top-level *.safetensors) are read
   with Range requests, 8 bytes then exactly the header, concurrently; never the data region.
4. Headers are cached by (repo, sha, file) in Apron's cache, so a second plan of the same commit
   sends no header requests, and HF_HUB_OFFLINE=1 can plan from the cache alone.
Parsing is safetensors.py's and files.py's, the same as for a local folder.
"""

from __future__ import annotations

import re
import sys
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

from apron.checkpoint import files as cf
from apron.checkpoint import hub_cache
from apron.checkpoint.hub_http import (
    FetchStats,
    HubSettings,
    ShardBytes,
    Where,
    fetch_shard_header,
    offline_error,
    with_retries,
)
from apron.checkpoint.model import Checkpoint
from apron.checkpoint.safetensors import LENGTH_PREFIX_BYTES, TensorInfo, header_length, parse_header
from apron.errors import BadInput, Failed
from apron.frozen import frozen

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Any

COMMIT_SHA = re.compile(r"^[0-9a-f]{40}$")
SMALL_FILES = (cf.CONFIG, *cf.OPTIONAL_FILES, cf.INDEX)


@frozen
class Listing:
    """What a repo held at one commit: file name -> size in bytes (None when the Hub did not say)."""

    repo_id: str
    sha: str
    sizes: dict[str, int | None]


def load_hub(repo_id: str, revision: str | None = None, *, settings: HubSettings | None = None) -> Checkpoint:
    settings = settings or HubSettings.from_env()
    stats = FetchStats()
    listing = resolve_listing(repo_id, revision, settings, stats)
    texts = fetch_small_files(listing, settings)
    # Parsed before any shard is fetched: a broken config.json fails fast.
    small = cf.parse_small_files(texts, lambda name: f"{listing.repo_id}/{name}")
    names = weight_files(listing, texts)
    shards = fetch_headers(listing, names, settings, stats)
    return _checkpoint(listing, revision, small, sum(map(len, texts.values())), shards, stats)


# --- 1. revision and file list ------------------------------------------------------------------


def resolve_listing(repo_id: str, revision: str | None, settings: HubSettings, stats: FetchStats) -> Listing:
    from huggingface_hub import constants

    wanted = revision or "main"
    where = Where(repo_id, wanted)
    if constants.is_offline_mode():
        sha = revision if revision and COMMIT_SHA.match(revision) else hub_cache.read_ref(repo_id, wanted)
        sizes = hub_cache.read_listing(repo_id, sha) if sha else None
        if sha is None or sizes is None:
            raise offline_error(where, "no file list")
        return Listing(repo_id, sha, sizes)
    if revision and COMMIT_SHA.match(revision):  # a commit never changes: a cached listing is the truth
        sizes = hub_cache.read_listing(repo_id, revision)
        if sizes is not None:
            return Listing(repo_id, revision, sizes)
    listing = with_retries(lambda: _model_info(repo_id, revision, settings, stats), where, settings, stats)
    hub_cache.write_listing(repo_id, listing.sha, listing.sizes)
    hub_cache.write_ref(repo_id, wanted, listing.sha)
    return listing


def _model_info(repo_id: str, revision: str | None, settings: HubSettings, stats: FetchStats) -> Listing:
    from huggingface_hub import HfApi

    stats.add(requests=1)
    info = HfApi().model_info(repo_id, revision=revision, files_metadata=True, timeout=settings.timeout_seconds)
    if not info.sha:
        raise Failed(f"Hub repo '{repo_id}': the model-info answer has no commit sha; check HF_ENDPOINT")
    sizes = {s.rfilename: (s.lfs.size if s.lfs else s.size) for s in info.siblings or []}
    return Listing(repo_id, info.sha, sizes)


# --- 2. config files ----------------------------------------------------------------------------


def fetch_small_files(listing: Listing, settings: HubSettings) -> dict[str, bytes]:
    """config.json and its companions, through huggingface_hub's download and cache (which skips the
    network for a commit already cached), fetched concurrently."""
    if cf.CONFIG not in listing.sizes:
        raise BadInput(
            f"Hub repo '{listing.repo_id}' at {listing.sha[:12]} has no config.json; Apron plans "
            "Transformers-format checkpoints (config.json and *.safetensors)"
        )
    names = [name for name in SMALL_FILES if name in listing.sizes]
    with ThreadPoolExecutor(max_workers=min(settings.max_workers, len(names))) as pool:
        contents = _all_or_first_error(pool, [pool.submit(_download, listing, name, settings) for name in names])
    return dict(zip(names, contents, strict=True))


def _download(listing: Listing, name: str, settings: HubSettings) -> bytes:
    """One small file through hf_hub_download. The library retries its metadata HEAD itself and then
    raises LocalEntryNotFoundError, which is not retried again here; its GET retries only 408/429,
    so a 5xx or a reset there gets Apron's retries."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.utils import silent_tqdm

    def download() -> str:
        return hf_hub_download(
            listing.repo_id, name, revision=listing.sha, etag_timeout=settings.timeout_seconds, tqdm_class=silent_tqdm
        )

    path = with_retries(download, Where(listing.repo_id, listing.sha[:12], name), settings)
    with open(path, "rb") as handle:
        return handle.read()


def weight_files(listing: Listing, texts: dict[str, bytes]) -> list[str]:
    """The shards vLLM loads: those the index names when there is one, else every top-level
    *.safetensors (vLLM globs the snapshot folder, not its subfolders)."""
    label = f"{listing.repo_id}/{cf.INDEX}"
    if cf.INDEX in texts:
        names = cf.weight_files_from_index(cf.parse_json(texts[cf.INDEX], label), label)
        missing = [name for name in names if name not in listing.sizes]
        if missing:
            raise BadInput(
                f"{label}: field 'weight_map' names {missing[0]}, which is not in the repo at "
                f"{listing.sha[:12]}; the repo is incomplete, pick another revision"
            )
        return names
    names = sorted(name for name in listing.sizes if name.endswith(".safetensors") and "/" not in name)
    if not names:
        raise BadInput(
            f"Hub repo '{listing.repo_id}' at {listing.sha[:12]} has no *.safetensors files; Apron "
            "reads safetensors headers (.bin/.pt/GGUF checkpoints are not supported)"
        )
    return names


# --- 3. safetensors headers ---------------------------------------------------------------------


def fetch_headers(listing: Listing, names: list[str], settings: HubSettings, stats: FetchStats) -> list[ShardBytes]:
    from huggingface_hub import constants

    cached = {name: hub_cache.read_header(listing.repo_id, listing.sha, name) for name in names}
    missing = [name for name in names if cached[name] is None]
    if missing and constants.is_offline_mode():
        raise offline_error(
            Where(listing.repo_id, listing.sha[:12]), f"no headers for {len(missing)} of {len(names)} shard(s)"
        )
    fetched = _fetch_concurrently(listing, missing, settings, stats) if missing else {}
    out = []
    for name in names:
        raw = cached[name]
        out.append(fetched[name] if raw is None else ShardBytes(name, raw, listing.sizes.get(name), from_cache=True))
    return out


def _fetch_concurrently(
    listing: Listing, names: list[str], settings: HubSettings, stats: FetchStats
) -> dict[str, ShardBytes]:
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers

    headers = build_hf_headers()  # token from HF_TOKEN or `hf auth login`, as the library finds it
    progress = _Progress(listing.repo_id, len(names), settings.progress)

    def one(name: str) -> ShardBytes:
        url = hf_hub_url(listing.repo_id, name, revision=listing.sha)
        shard = fetch_shard_header(
            url, headers, name, _label(listing, name), settings, stats, Where(listing.repo_id, listing.sha[:12], name)
        )
        progress.step()
        return shard

    with ThreadPoolExecutor(max_workers=min(settings.max_workers, len(names))) as pool:
        shards = _all_or_first_error(pool, [pool.submit(one, name) for name in names])
    return {shard.file: shard for shard in shards}


def _all_or_first_error(pool: ThreadPoolExecutor, futures: list[Any]) -> list[Any]:
    """Results in submission order; on the first failure, cancel what has not started and raise it."""
    done, _ = wait(futures, return_when=FIRST_EXCEPTION)
    for future in futures:
        if future in done and future.exception() is not None:
            pool.shutdown(wait=False, cancel_futures=True)
            raise future.exception()
    return [future.result() for future in futures]


class _Progress:
    """A line on stderr every few shards, for fetches long enough to wonder about; quiet when
    stderr is not a terminal (logs and pipes), unless asked."""

    def __init__(self, repo_id: str, total: int, enabled: bool | None):
        self._repo_id, self._total, self._done = repo_id, total, 0
        self._every = max(1, total // 4)
        self._enabled = total > 1 and (sys.stderr.isatty() if enabled is None else enabled)
        self._lock = threading.Lock()

    def step(self) -> None:
        with self._lock:
            self._done += 1
            if self._enabled and (self._done % self._every == 0 or self._done == self._total):
                print(
                    f"apron: read {self._done}/{self._total} safetensors headers of {self._repo_id}",
                    file=sys.stderr,
                    flush=True,
                )


# --- 4. parse and assemble ----------------------------------------------------------------------


def _label(listing: Listing, name: str) -> str:
    return f"{listing.repo_id}/{name} (revision {listing.sha[:12]})"


def parse_shard(listing: Listing, shard: ShardBytes) -> list[TensorInfo]:
    label = _label(listing, shard.file)
    size = shard.file_size_bytes if shard.file_size_bytes is not None else listing.sizes.get(shard.file)
    length = header_length(shard.raw[:LENGTH_PREFIX_BYTES], label, size)
    raw = shard.raw[LENGTH_PREFIX_BYTES : LENGTH_PREFIX_BYTES + length]
    data_bytes = size - LENGTH_PREFIX_BYTES - length if size is not None else None
    tensors = parse_header(raw, label, data_bytes)
    return [TensorInfo(t.name, t.dtype, t.shape, shard.file) for t in tensors]


def _checkpoint(
    listing: Listing,
    revision: str | None,
    small: cf.SmallFiles,
    small_files_bytes: int,
    shards: list[ShardBytes],
    stats: FetchStats,
) -> Checkpoint:
    tensors = cf.merge_shards(
        [(shard.file, parse_shard(listing, shard)) for shard in shards],
        f"Hub repo '{listing.repo_id}' at {listing.sha[:12]}",
    )
    for shard in shards:  # cache only what parsed: a corrupt answer must not outlive this plan
        if not shard.from_cache:
            hub_cache.write_header(listing.repo_id, listing.sha, shard.file, shard.raw)
    hits = sum(shard.from_cache for shard in shards)
    notes = [
        f"read from the Hub at commit {listing.sha}"
        + (f" (revision '{revision}')" if revision and revision != listing.sha else "")
    ]
    if stats.range_ignored_files:
        notes.append(
            f"the server ignored Range for {len(stats.range_ignored_files)} shard(s); Apron stopped "
            "reading each at the end of its header"
        )
    return Checkpoint(
        source=listing.repo_id,
        source_kind="hub",
        repo_id=listing.repo_id,
        revision=listing.sha,
        config=small.config,
        tensors=tuple(tensors),
        files=tuple(shard.file for shard in shards),
        generation_config=small.generation_config,
        tokenizer_config=small.tokenizer_config,
        chat_template=small.chat_template,
        processor_configs=small.processor_configs,
        header_bytes_read=small_files_bytes + sum(len(shard.raw) for shard in shards),
        notes=tuple(notes),
        extra={
            "hub": {
                "commit": listing.sha,
                "requested_revision": revision,
                "requests": stats.requests,
                "bytes_received": stats.bytes_received,
                "retries": stats.retries,
                "header_cache_hits": hits,
                "range_ignored_files": sorted(stats.range_ignored_files),
            }
        },
    )
