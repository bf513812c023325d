"""One line of a vLLM log as a person reads it: the prefixes taken off, what they said kept.

A line reaches a reader through several layers, each optional:
    container   `vllm-1  | ` (docker compose), `[pod/vllm-0/vllm] ` (kubectl --prefix),
                `May 01 10:00:00 host vllm[12]: ` (journald), an ISO timestamp (docker -t, k8s)
    process     `(EngineCore_DP0 pid=12) `, `(VllmWorker rank=0 pid=9) `, `(Worker_TP1 pid=3) `,
                `(RayWorkerWrapper pid=9, ip=10.0.0.2) `, `[rank0]: ` (torchrun)
    logger      `INFO 05-01 10:00:00 [core.py:74] ` (0.8 on), `INFO 05-01 10:00:00 core.py:74] `
                (0.6-0.7), the same without file info, `W0501 10:00:00.1 12 file.cc:3] ` (glog),
                `INFO:     ` (uvicorn)
    suffix      ` [repeated 3x across cluster]` (Ray's log deduplication)
and what is left of the logger prefix when a paste or a log shipper dropped part of it: the level
alone (`(EngineCore_DP0 pid=258) INFO Available KV cache memory: 9.25 GiB`), the level and the file
(`INFO [core.py:74] ...`), the file alone (`[core.py:74] ...`), the time and the file; plus ANSI colour anywhere, Windows line ends, and tqdm's carriage-return redraws. vLLM's own format
strings: logger.py `_FORMAT` (0.6: "%(levelname)s %(asctime)s %(filename)s:%(lineno)d] %(message)s";
0.8: "[%(filename)s:%(lineno)d]"; 0.10: "%(fileinfo)s"; 0.33: "(%(vllm_process_name)s pid=%(process)d) "
inside the format, after VLLM_LOGGING_PREFIX); the process tag of 0.6-0.32 comes from
`_add_prefix` (executor/multiproc_worker_utils.py, later utils/system_utils.py). A line with none
of these (a prefix-stripped paste, a bare traceback on stderr) is read as it is.
"""

from __future__ import annotations

import re
import textwrap

from apron.frozen import frozen

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_LEVELS = r"DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL"
# (name, regex) of the prefixes a line may start with, tried in turn until none matches.
_CONTAINER = (
    re.compile(r"^(?P<container>[A-Za-z0-9][\w.-]*[-_]\d+)\s+\|\s?"),  # compose v2 `vllm-1`, v1 `vllm_1`
    re.compile(r"^\[pod/(?P<container>[^\]\s]+)\]\s"),
    re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]+ (?P<container>[\w.@-]+)(?:\[\d+\])?:\s"),
)
# One space after it: the indentation of a traceback's code line that follows is the line's own.
_TIMESTAMP = re.compile(r"^\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?[ \t]")
PROCESS = re.compile(
    r"\((?P<proc>[A-Za-z_][\w:.-]*(?: [A-Za-z_][\w:.-]*)?)?(?:\s*rank=(?P<rank>\d+))?\s*pid=(?P<pid>\d+)"
    r"(?:,\s*ip=(?P<ip>[^)\s]+))?\)\s?"
)
_RAY_DAEMON = re.compile(r"^\((?P<proc>raylet|gcs_server|autoscaler[^)]*|monitor|dashboard[^)]*)\)\s?")
_TORCHRUN_RANK = re.compile(r"^\[rank(?P<rank>\d+)\]:\s?")
HEADER = re.compile(
    rf"(?P<level>{_LEVELS})\s+(?P<time>(?:\d{{4}}-)?\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\s+"
    r"(?:\[?(?P<file>[\w./-]+\.py):(?P<line>\d+)\]\s?)?"
)
_GLOG = re.compile(r"^\[?(?P<level>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+(?:\d+\s+)?(?P<file>[^\]\s]+):(?P<line>\d+)\]\s?")
_UVICORN = re.compile(rf"^(?P<level>{_LEVELS}):\s+")
# The logger prefix with parts missing. A level alone must be followed by a space: `INFO:` is uvicorn's.
_PARTIAL = re.compile(
    rf"^(?:(?P<level>{_LEVELS})\s+)?(?:(?P<time>(?:\d{{4}}-)?\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\s+)?"
    r"(?:\[?(?P<file>[\w./-]+\.py):(?P<line>\d+)\]\s?)?"
)
_GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}
_REPEATED = re.compile(r"\s*\[repeated (?P<times>\d+)x across cluster\]\s*$")
QUIET_LEVELS = ("DEBUG", "INFO", "WARNING")


@frozen
class LogLine:
    number: int  # 1-based, as an editor shows it
    process: str | None  # "EngineCore_DP0", "Worker_TP1", "RayWorkerWrapper"; None without a tag
    level: str | None  # the logger's level; None for a line no logger printed (or one pasted without it)
    source: str | None  # "core.py:74" from the logger prefix
    message: str  # the text with every prefix taken off
    pid: str | None = None
    ip: str | None = None  # Ray: the node the process runs on
    rank: int | None = None  # `rank=0` or `[rank0]:`
    container: str | None = None  # `vllm-1`, a pod, a journald unit
    repeated: int = 1  # Ray printed it once for this many processes
    # The logger prefix it carried: "vllm" (level and time, vLLM's own), "partial" (what a paste left
    # of it: the level, the file), "glog", "uvicorn"; None for a line that carried none.
    prefix: str | None = None

    @property
    def process_key(self) -> str | None:
        """One process of the whole run: pids repeat across Ray nodes, so the node is part of it."""
        if self.process is None and self.pid is None:
            return None
        key = f"{self.process or 'process'} pid={self.pid}" if self.pid else str(self.process)
        return f"{key} ip={self.ip}" if self.ip else key

    @property
    def is_frame(self) -> bool:
        """A traceback's own line: its header, a frame, a caret line, a chain marker (the code line
        under a frame is known only from the line before it)."""
        return bool(_FRAME.match(self.message))


_FRAME = re.compile(
    r"^\s*(?:Traceback \(most recent call last\)|File \"|[\^~]+\s*$|"
    r"During handling of the above exception|The above exception was the direct cause)"
)


def read_line(number: int, raw: str) -> LogLine:
    text = ANSI.sub("", raw).rstrip("\r\n")
    text = text.rsplit("\r", 1)[-1]  # tqdm redraws a line with carriage returns: the last one wins
    found: dict[str, str | None] = {}
    text = _strip_outer(text, found)
    header = HEADER.match(text)
    if header is None and (later := HEADER.search(text)) and later.start() > 0:
        # VLLM_LOGGING_PREFIX or any prefix we do not know: the logger's own prefix still marks the start.
        tag = PROCESS.search(text[: later.start()])
        if tag and "process" not in found:
            _take_process(tag, found)
        header = later
    if header is not None:
        found["level"] = {"WARN": "WARNING"}.get(header["level"], header["level"])
        found["source"] = f"{header['file']}:{header['line']}" if header["file"] else None
        found["prefix"] = "vllm"
        text = text[header.end() :]
    else:
        text = _strip_inner(text, found)
    repeated = 1
    if suffix := _REPEATED.search(text):
        repeated, text = int(suffix["times"]), text[: suffix.start()]
    rank = found.get("rank")
    return LogLine(
        number,
        found.get("process"),
        found.get("level"),
        found.get("source"),
        text,
        pid=found.get("pid"),
        ip=found.get("ip"),
        rank=int(rank) if rank is not None else None,
        container=found.get("container"),
        repeated=repeated,
        prefix=found.get("prefix"),
    )


def _strip_outer(text: str, found: dict[str, str | None]) -> str:
    """Container, timestamp and process prefixes, in whatever order they nest."""
    for _ in range(6):
        m = _prefix_match(text, found)
        if m is None:
            return text
        text = text[m.end() :]
    return text


def _prefix_match(text: str, found: dict[str, str | None]) -> re.Match[str] | None:
    if "container" not in found:
        for regex in _CONTAINER:
            if m := regex.match(text):
                found["container"] = m["container"]
                return m
    if m := _TIMESTAMP.match(text):
        return m
    if "process" not in found:
        m = PROCESS.match(text) or _RAY_DAEMON.match(text)
        if m:
            _take_process(m, found)
            return m
    if m := _TORCHRUN_RANK.match(text):
        found.setdefault("rank", m["rank"])
        found.setdefault("process", f"rank{m['rank']}")
        return m
    return None


def _take_process(m: re.Match[str], found: dict[str, str | None]) -> None:
    groups = m.groupdict()
    found["process"] = (groups.get("proc") or "process").strip()
    for key in ("pid", "ip", "rank"):
        if groups.get(key) is not None:
            found[key] = groups[key]


def _strip_inner(text: str, found: dict[str, str | None]) -> str:
    """Loggers other than vLLM's (glog on torch's C++ side, uvicorn), then what a paste left of vLLM's."""
    if m := _GLOG.match(text):
        found.update(level=_GLOG_LEVELS[m["level"]], source=f"{m['file']}:{m['line']}", prefix="glog")
        return text[m.end() :]
    if m := _UVICORN.match(text):
        found.update(level={"WARN": "WARNING"}.get(m["level"], m["level"]), prefix="uvicorn")
        return text[m.end() :]
    m = _PARTIAL.match(text)
    if m is None or not (m["level"] or m["file"]):
        return text
    if m["level"]:
        found["level"] = {"WARN": "WARNING"}.get(m["level"], m["level"])
    if m["file"]:
        found["source"] = f"{m['file']}:{m['line']}"
    found["prefix"] = "partial"
    return text[m.end() :]


def read_lines(text: str) -> list[LogLine]:
    return [read_line(number, raw) for number, raw in enumerate(unquoted(text).split("\n"), start=1)]


_QUOTED = re.compile(r"^>[ \t]?", re.M)


def unquoted(text: str) -> str:
    """A paste quoted or indented as a whole (an issue reply's `> `, a Markdown block's four spaces)
    without that: what every non-empty line starts with is no part of any line."""
    lines = [line for line in text.split("\n") if line.strip()]
    if lines and all(line.startswith(">") for line in lines):
        text = _QUOTED.sub("", text)
    return textwrap.dedent(text) if lines and lines[0][:1] in (" ", "\t", ">") else text


def shutdown_index(lines: list[LogLine]) -> int:
    """The index of the first `[shutdown]` line (len(lines) when none): what follows is the engine
    tearing itself down, whose errors are consequences, never causes."""
    for index, line in enumerate(lines):
        if line.message.lstrip().startswith("[shutdown]"):
            return index
    return len(lines)
