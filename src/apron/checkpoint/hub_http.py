"""HTTP for the Hub path: retries with backoff, Range reads that stop at the header, and the one
place where huggingface_hub and httpx errors become Apron's one-line errors.

URLs, auth headers, the HTTP session and the error types are huggingface_hub's (hf_hub_url,
build_hf_headers, get_session, hf_raise_for_status), so HF_ENDPOINT, HF_TOKEN, a stored token and
HF_HUB_OFFLINE behave as in every other Hub tool. The retry loop is Apron's own: the library's
http_backoff cannot retry a failure while reading a streamed body, adds a second to every Retry-After,
and logs multi-line warnings, while a plan needs one bounded policy that tests can make fast.

huggingface_hub and httpx2 are imported inside functions: `apron plan` on a local folder must not
pay for importing them.
"""

from __future__ import annotations

import email.utils
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from apron.checkpoint.safetensors import LENGTH_PREFIX_BYTES, header_length
from apron.errors import ApronError, BadInput, Failed
from apron.frozen import frozen

TYPE_CHECKING = False  # typing is not imported at run time (apron/lite_typing.py)
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")

# The statuses the Hub (or a CDN in front of it) uses for "not now": worth another try.
TRANSIENT_STATUS = (408, 429, 500, 502, 503, 504)
TOKEN_HINT = "set HF_TOKEN or run `hf auth login`"


@frozen
class HubSettings:
    """How hard to try. Every request has a timeout; retries are bounded in count and in wait."""

    timeout_seconds: float = 10.0
    max_attempts: int = 5
    # A request that timed out is tried again only while another full timeout still ends within this
    # much time since its first try: a Hub that accepts the connection and never answers costs two
    # tries (about 20 s), not five (65 s), and the plan ends with one line within 30 s.
    timeout_budget_seconds: float = 25.0
    retry_base_seconds: float = 0.5
    retry_max_seconds: float = 8.0
    max_retry_after_seconds: float = 60.0  # a server asking for a longer wait gets a Failed instead
    max_workers: int = 8
    progress: bool | None = None  # None: progress lines only when stderr is a terminal

    @classmethod
    def from_env(cls) -> HubSettings:
        """Defaults, overridden by APRON_HUB_* variables (tests use them to make retries fast)."""
        return cls(
            timeout_seconds=_env_number("APRON_HUB_TIMEOUT_SECONDS", cls.timeout_seconds),
            max_attempts=int(_env_number("APRON_HUB_MAX_ATTEMPTS", cls.max_attempts, minimum=1)),
            timeout_budget_seconds=_env_number("APRON_HUB_TIMEOUT_BUDGET_SECONDS", cls.timeout_budget_seconds),
            retry_base_seconds=_env_number("APRON_HUB_RETRY_BASE_SECONDS", cls.retry_base_seconds),
            retry_max_seconds=_env_number("APRON_HUB_RETRY_MAX_SECONDS", cls.retry_max_seconds),
            max_retry_after_seconds=_env_number("APRON_HUB_MAX_RETRY_AFTER_SECONDS", cls.max_retry_after_seconds),
            max_workers=int(_env_number("APRON_HUB_WORKERS", cls.max_workers, minimum=1)),
        )

    def backoff_seconds(self, attempt: int) -> float:
        """Exponential, capped, with a little jitter so concurrent shards do not retry in lockstep."""
        delay: float = min(self.retry_max_seconds, self.retry_base_seconds * 2.0 ** (attempt - 1))
        return delay * (1 + 0.1 * random.random())


def _env_number(name: str, default: float, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise BadInput(f"{name}={raw!r} is not a number; unset it or give e.g. {default}") from None
    if value < minimum:
        raise BadInput(f"{name}={raw!r} is below {minimum}; unset it or give e.g. {default}")
    return value


@frozen
class Where:
    """What a request was for, so an error can name it."""

    repo_id: str
    revision: str | None = None
    file: str | None = None

    def describe(self) -> str:
        parts = [f"Hub repo '{self.repo_id}'"]
        if self.revision:
            parts.append(f"revision '{self.revision}'")
        if self.file:
            parts.append(f"file '{self.file}'")
        return ", ".join(parts)


@dataclass
class FetchStats:
    """What the header fetch cost on the wire; shared by the worker threads."""

    requests: int = 0
    bytes_received: int = 0
    retries: int = 0
    range_ignored_files: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(
        self, *, requests: int = 0, bytes_received: int = 0, retries: int = 0, range_ignored_file: str | None = None
    ) -> None:
        with self._lock:
            self.requests += requests
            self.bytes_received += bytes_received
            self.retries += retries
            if range_ignored_file:
                self.range_ignored_files.add(range_ignored_file)


# --- retries ------------------------------------------------------------------------------------


def with_retries(call: Callable[[], T], where: Where, settings: HubSettings, stats: FetchStats | None = None) -> T:
    """Run `call`, retrying transient failures with backoff; any other failure, or the last
    transient one, becomes an Apron error naming `where`. A timeout is retried only while another
    try still ends within the timeout budget."""
    started = time.monotonic()
    for attempt in range(1, settings.max_attempts + 1):
        try:
            return call()
        except ApronError:
            raise
        except Exception as exc:  # noqa: BLE001 - classified below; unknown ones are re-raised
            delay = _retry_delay(exc, attempt, settings)
            if delay is not None and _is_timeout(exc):
                ends = time.monotonic() - started + delay + settings.timeout_seconds
                delay = delay if ends <= settings.timeout_budget_seconds else None
            if delay is None or attempt == settings.max_attempts:
                mapped = to_apron_error(exc, where, attempt, settings, time.monotonic() - started)
                if mapped is None:
                    raise
                raise mapped from exc
            if stats is not None:
                stats.add(retries=1)
            time.sleep(delay)
    raise AssertionError("unreachable: the loop returns or raises")


def _is_timeout(exc: BaseException) -> bool:
    import httpx2

    return isinstance(exc, httpx2.TimeoutException)


def _retry_delay(exc: BaseException, attempt: int, settings: HubSettings) -> float | None:
    """Seconds to wait before the next attempt, or None when `exc` is not worth retrying."""
    import httpx2

    if isinstance(exc, httpx2.TooManyRedirects | httpx2.UnsupportedProtocol | httpx2.ProxyError):
        return None
    if isinstance(exc, httpx2.ConnectError):
        # The name did not resolve or nothing listens: no network, or a wrong HF_ENDPOINT. Waiting
        # does not change that, so the plan fails at once instead of spending seconds on retries.
        # (A connect *timeout* is a TimeoutException, retried below.)
        return None
    if isinstance(exc, httpx2.TransportError):  # timeouts, resets, refused connections, cut bodies
        return settings.backoff_seconds(attempt)
    status = _status_of(exc)
    if status not in TRANSIENT_STATUS:
        return None
    retry_after = retry_after_seconds(exc.response.headers)  # type: ignore[attr-defined]
    if retry_after is None:
        return settings.backoff_seconds(attempt)
    if retry_after > settings.max_retry_after_seconds:
        return None  # waiting that long is the user's call, not a planner's
    return max(retry_after, settings.backoff_seconds(attempt))


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Retry-After as seconds: delay-seconds or an HTTP date (RFC 9110 section 10.2.3)."""
    value = (headers.get("Retry-After") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _status_of(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


# --- errors -------------------------------------------------------------------------------------


def offline_error(where: Where, missing: str) -> BadInput:
    """`missing` completes "Apron's cache has ...", e.g. "no file list" or "no headers for 2 of 5 shards"."""
    return BadInput(
        f"HF_HUB_OFFLINE is set and Apron's cache has {missing} for {where.describe()}; unset "
        "HF_HUB_OFFLINE to read them from the Hub (a few KB per shard), or give a local "
        "checkpoint folder"
    )


def to_apron_error(
    exc: BaseException, where: Where, attempts: int, settings: HubSettings, elapsed_seconds: float | None = None
) -> ApronError | None:
    """One line saying what failed and what to do; None for errors this module does not know."""
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub import errors as hf

    if isinstance(exc, hf.OfflineModeIsEnabled) or (
        isinstance(exc, hf.LocalEntryNotFoundError) and constants.is_offline_mode()
    ):
        return BadInput(
            f"HF_HUB_OFFLINE is set and {where.describe()} is not in the huggingface_hub cache; "
            "unset HF_HUB_OFFLINE to download it, or give a local checkpoint folder"
        )
    if isinstance(exc, hf.LocalEntryNotFoundError):
        cause = exc.__cause__
        mapped = to_apron_error(cause, where, attempts, settings, elapsed_seconds) if cause is not None else None
        return mapped or Failed(
            f"could not download {where.describe()} from {constants.ENDPOINT} and it is "
            "not in the huggingface_hub cache; check your connection or HF_ENDPOINT"
        )
    if isinstance(exc, hf.HFValidationError):
        return BadInput(
            f"'{where.repo_id}' is not a valid Hub repo id; give org/name (letters, digits, '-', '_', "
            "'.'), a checkpoint folder or a snapshot file"
        )
    if isinstance(exc, hf.FileMetadataError):
        return Failed(
            f"{where.describe()}: the answer from {constants.ENDPOINT} lacks the Hub's headers "
            "(X-Repo-Commit, ETag); check HF_ENDPOINT and any proxy"
        )
    status = _status_of(exc)
    if isinstance(exc, hf.HfHubHTTPError) and status is not None:
        return _http_error(exc, status, where, attempts)
    if isinstance(exc, httpx2.TimeoutException):
        spent = f", {elapsed_seconds:.0f} s in all" if elapsed_seconds is not None else ""
        return Failed(
            f"{where.describe()}: the Hub at {constants.ENDPOINT} did not answer within "
            f"{settings.timeout_seconds:g} s on {attempts} attempt(s){spent}; check your connection or "
            "HF_ENDPOINT, or raise APRON_HUB_TIMEOUT_SECONDS"
        )
    if isinstance(exc, httpx2.ConnectError):
        return Failed(
            f"{where.describe()}: cannot reach {constants.ENDPOINT} ({_first_line(exc)}); check your "
            "connection or HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to plan from cached headers"
        )
    if isinstance(exc, httpx2.TransportError):
        return Failed(
            f"{where.describe()}: the connection failed ({type(exc).__name__}: {_first_line(exc)}) "
            f"on {attempts} attempt(s) (endpoint {constants.ENDPOINT}); try again later"
        )
    return None


def _http_error(exc: BaseException, status: int, where: Where, attempts: int) -> ApronError:
    from huggingface_hub import constants
    from huggingface_hub import errors as hf

    sent_token = _sent_token(exc)
    if isinstance(exc, hf.GatedRepoError):
        access = "the token sent has not been granted access" if sent_token else "no token was sent"
        return BadInput(
            f"Hub repo '{where.repo_id}' is gated (HTTP {status}) and {access}; accept its terms at "
            f"{constants.ENDPOINT}/{where.repo_id} and pass a token with access: {TOKEN_HINT}"
        )
    if isinstance(exc, hf.RevisionNotFoundError):
        return BadInput(
            f"Hub repo '{where.repo_id}' has no revision '{where.revision}' (HTTP {status}); give a "
            "branch, tag or commit sha that exists there"
        )
    if isinstance(exc, hf.RemoteEntryNotFoundError):
        return BadInput(
            f"{where.describe()}: the file is not in the repo (HTTP {status}); the repo listing "
            "changed while reading, or the index names a missing shard"
        )
    if status in (401, 403):
        access = (
            f"the token sent has no access to it; to use another, {TOKEN_HINT}"
            if sent_token
            else f"no token was sent; if you have access, {TOKEN_HINT}"
        )
        return BadInput(
            f"Hub repo '{where.repo_id}' refused access (HTTP {status}): it is private, gated or "
            f"does not exist, and {access}; no local folder named '{where.repo_id}' exists either"
        )
    if status == 404 and where.file:
        return BadInput(
            f"{where.describe()}: not found on the Hub (HTTP 404) though the repo lists it; the repo "
            "changed while reading, try again"
        )
    if status == 404:
        return BadInput(
            f"{where.describe()}: not found on the Hub (HTTP 404), and no local folder named "
            f"'{where.repo_id}' exists either; check the repo id (org/name) and revision"
        )
    if status == 429:
        response = getattr(exc, "response", None)
        wait = retry_after_seconds(response.headers) if response is not None else None
        asked = f" and asks to wait {wait:.0f} s" if wait is not None else ""
        return Failed(
            f"{where.describe()}: the Hub is rate limiting requests (HTTP 429){asked}, after {attempts} "
            f"attempt(s); retry later, or pass a token ({TOKEN_HINT}) for higher limits"
        )
    if status in TRANSIENT_STATUS:
        return Failed(
            f"{where.describe()}: the Hub answered HTTP {status} on {attempts} attempt(s); try again "
            "later or check HF_ENDPOINT"
        )
    return Failed(f"{where.describe()}: the Hub answered HTTP {status} ({_first_line(exc)[:120]})")


def _sent_token(exc: BaseException) -> bool:
    """Whether the failed request carried a token (asked of the request, so the token is never read)."""
    request = getattr(getattr(exc, "response", None), "request", None)
    return request is not None and "authorization" in request.headers


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# --- Range reads --------------------------------------------------------------------------------


@frozen
class ShardBytes:
    """The first 8 + N bytes of one safetensors file, and what the server said about the file."""

    file: str
    raw: bytes  # the 8-byte length prefix followed by the header
    file_size_bytes: int | None  # from Content-Range or Content-Length, when the server says
    from_cache: bool = False


class _Body:
    """A streamed response body read exactly: no byte past what is asked is pulled off the socket
    beyond the chunk already in flight."""

    def __init__(self, response: Any, stats: FetchStats):
        self._chunks: Iterator[bytes] = response.iter_raw()
        self._buffer = bytearray()  # headers of MoE checkpoints reach megabytes: append, do not re-copy
        self._stats = stats

    def read(self, size: int) -> bytes:
        while len(self._buffer) < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._stats.add(bytes_received=len(chunk))
            self._buffer += chunk
        out = bytes(self._buffer[:size])
        del self._buffer[:size]
        return out


@frozen
class _Part:
    body: _Body
    is_whole_file: bool  # the server ignored Range and is sending the file from byte 0
    file_size_bytes: int | None


@contextmanager
def _open_range(
    url: str, headers: dict[str, Any], start: int, length: int, settings: HubSettings, stats: FetchStats
) -> Iterator[_Part]:
    """GET bytes [start, start + length) of `url`, following redirects (the Hub sends LFS files to a
    CDN; httpx keeps Range across the hop and drops Authorization when the host changes)."""
    from huggingface_hub.utils import get_session, hf_raise_for_status

    request_headers = {
        **headers,
        "Range": f"bytes={start}-{start + length - 1}",
        "Accept-Encoding": "identity",
    }  # a compressed body has no byte offsets
    stats.add(requests=1)
    with get_session().stream(
        "GET", url, headers=request_headers, timeout=settings.timeout_seconds, follow_redirects=True
    ) as response:
        if response.status_code == 416:  # the file ends before `start`: an empty part, sized if said
            yield _Part(_Body(_EmptyResponse(), stats), False, _total_from_content_range(response.headers))
            return
        hf_raise_for_status(response)
        if response.status_code not in (200, 206):  # e.g. a redirect without Location: not file bytes
            raise Failed(
                f"{url}: HTTP {response.status_code} to a Range request, expected 206 or 200; check "
                "HF_ENDPOINT and any proxy"
            )
        if response.status_code == 206:
            _check_content_range(response.headers, start, url)
            yield _Part(_Body(response, stats), False, _total_from_content_range(response.headers))
        else:
            yield _Part(_Body(response, stats), True, _int_or_none(response.headers.get("Content-Length")))


class _EmptyResponse:
    def iter_raw(self) -> Iterator[bytes]:
        return iter(())


def _check_content_range(headers: Mapping[str, str], start: int, url: str) -> None:
    value = headers.get("Content-Range", "")
    try:
        first = int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        raise Failed(
            f"{url}: a 206 answer without a usable Content-Range ({value!r}); the server or a "
            "proxy mangles Range requests"
        ) from None
    if first != start:
        raise Failed(
            f"{url}: asked for bytes from {start}, the server sent from {first} ({value!r}); the "
            "server or a proxy mangles Range requests"
        )


def _total_from_content_range(headers: Mapping[str, str]) -> int | None:
    total = (headers.get("Content-Range") or "").rpartition("/")[2]
    return int(total) if total.isdigit() else None


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def fetch_shard_header(
    url: str, headers: dict[str, Any], file: str, label: str, settings: HubSettings, stats: FetchStats, where: Where
) -> ShardBytes:
    """Two Range requests: the 8-byte length, then exactly the header. A server that ignores Range
    gets one request, read up to the end of the header and then closed: the data region is never read."""

    def first() -> tuple[bytes, int | None, bytes | None]:
        with _open_range(url, headers, 0, LENGTH_PREFIX_BYTES, settings, stats) as part:
            prefix = part.body.read(LENGTH_PREFIX_BYTES)
            if not part.is_whole_file:
                return prefix, part.file_size_bytes, None
            stats.add(range_ignored_file=file)
            length = header_length(prefix, label, part.file_size_bytes)
            return prefix, part.file_size_bytes, part.body.read(length)

    def second(length: int) -> bytes:
        with _open_range(url, headers, LENGTH_PREFIX_BYTES, length, settings, stats) as part:
            if part.is_whole_file:
                stats.add(range_ignored_file=file)
                part.body.read(LENGTH_PREFIX_BYTES)
            return part.body.read(length)

    prefix, file_size, header = with_retries(first, where, settings, stats)
    if header is None:
        length = header_length(prefix, label, file_size)
        header = with_retries(lambda: second(length), where, settings, stats)
    return ShardBytes(file=file, raw=prefix + header, file_size_bytes=file_size)
