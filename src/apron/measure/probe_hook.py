"""The allocator probe that runs inside `vllm serve` (`apron probe`): a sitecustomize, not a module of Apron.

`apron probe` copies this file to the target as `sitecustomize.py` in a folder it puts first on the
engine's PYTHONPATH, so every Python process of the engine loads it at start-up. It imports nothing
but the standard library until the profiling function runs (torch, then, is already loaded), and it
touches nothing until the engine imports a module that defines one of the functions named in
APRON_PROBE_FUNCTIONS (a JSON list of "module:Qualified.name", taken from the release's engine facts).
That function is wrapped; its first call is recorded and every later call runs untouched:

- CUDA: torch.cuda.memory._record_memory_history over the call, then _snapshot(): the allocator's own
  event trace gives the moment of the peak and every block alive at it, with its Python stack; the
  segments left at the end give the bytes empty_cache() could not return; cudaMemGetInfo less
  memory_reserved() gives the memory outside torch.
- CPU (no caching allocator): torch.profiler with profile_memory=True over the call: the allocation
  events give the peak and the live blocks, the operators' recorded inputs give each block's shape.

What the engine computes is never changed (only recording is switched on and off). A failure inside
the probe is written into its reading (status "failed") and the engine goes on. The reading is JSON
in APRON_PROBE_DIR/probe-<pid>.json; Apron fetches it and matches it to the plan's buffers.
Standard library and torch only: this file runs with the engine's Python, where Apron is not installed.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import json
import linecache
import os
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import TypeAlias

    # A frame of an allocation's stack: the profiler's text ("file.py(12): fn", an operator) or a
    # frame of the CUDA allocator's history ({"filename", "line", "name", ...}).
    Frame: TypeAlias = str | dict[str, Any]
    Step: TypeAlias = tuple[bool, int, int, Sequence[Frame]]  # (is_alloc, addr, bytes, frames)
    Made: TypeAlias = tuple[int, Sequence[Frame], int]  # (bytes, frames, alloc step)
    Seen: TypeAlias = tuple[list[int], str, list[str]]  # (shape, dtype, the operators that read it)
    # (time, ptr, signed bytes, counter total, parent chain) of one profiler allocation event
    Allocation: TypeAlias = tuple[int, int, int, int, list[str]]
    # The engine's torch objects (profiler events, tensors' metadata) are untyped here: torch is the
    # engine's, not installed where Apron is type-checked.
    TorchObject: TypeAlias = Any

READING_SCHEMA = "apron.probe-reading/1"
MAX_TRACE_ENTRIES = 2_000_000
MAX_BLOCKS = 400
MAX_ALLOCATED = 30
MAX_READERS = 4
# Operators that only view, alias or convert a tensor: they say nothing about what reads it.
_VIEW_OPS = {
    "aten::view",
    "aten::reshape",
    "aten::_reshape_alias",
    "aten::as_strided",
    "aten::alias",
    "aten::select",
    "aten::slice",
    "aten::unsqueeze",
    "aten::squeeze",
    "aten::expand",
    "aten::t",
    "aten::transpose",
    "aten::permute",
    "aten::detach",
    "aten::copy_",
    "aten::_to_copy",
    "aten::result_type",
    "aten::empty_like",
    "aten::contiguous",
    "aten::flatten",
    "aten::unflatten",
    "aten::narrow",
    "aten::lift_fresh",
}
MAX_FRAMES = 6
# Frames of these libraries say how an allocation was made, not which tensor it is.
_LIBRARY_PARTS = ("/torch/", "/torch_", "<frozen", "/threading.py", "/contextlib.py", "/functools.py")
_SOURCE_MARKS = ("# File:", "# Source Nodes:", "# Topologically Sorted Source Nodes:")

_OUT_DIR = os.environ.get("APRON_PROBE_DIR", "")
# CPU: the profiler's Python tracer would name each allocation's frames, but it records every Python call
# of the run - a cold torch.compile makes millions (2.6 M events, 4 GiB and 40 s for a 2-layer model on
# dynamo's eager backend; out of memory under inductor). Off unless APRON_PROBE_STACKS=1: the blocks are
# named by their operators, and the parts of the run by record_function markers (_phase_markers).
_CPU_STACKS = os.environ.get("APRON_PROBE_STACKS", "0") == "1"
PHASE_PREFIX = "apron.phase:"
_STATE = {"active": False, "done": False}


def _targets() -> dict[str, list[str]]:
    try:
        names = json.loads(os.environ.get("APRON_PROBE_FUNCTIONS") or "[]")
    except ValueError:
        return {}
    out: dict[str, list[str]] = {}
    for name in names:
        module, _, qualname = str(name).partition(":")
        if module and qualname:
            out.setdefault(module, []).append(qualname)
    return out


_TARGETS = _targets()
_WRAPPED_NAMES = {q.rpartition(".")[2] for names in _TARGETS.values() for q in names}
_WRAPPED_LABEL = "the wrapped function itself"
_ORIGINALS: dict[str, Callable[..., Any]] = {}  # "module:Qualified.name" -> the function as the engine defined it


# -- finding and wrapping the function -------------------------------------------------------------


class _PatchingLoader(importlib.abc.Loader):
    """The module's own loader; after it has executed the module, the named functions are wrapped."""

    def __init__(self, loader: importlib.abc.Loader, name: str) -> None:
        self._loader, self._name = loader, name

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _patch(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in _TARGETS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader, fullname)
                return spec
        return None


def _patch(module: ModuleType) -> None:
    patched = []
    for qualname in _TARGETS.get(module.__name__, ()):
        try:
            owner_path, _, attr = qualname.rpartition(".")
            owner: object = module
            for part in owner_path.split(".") if owner_path else ():
                owner = getattr(owner, part)
            original = getattr(owner, attr)
            setattr(owner, attr, _wrap(original, f"{module.__name__}:{qualname}"))
            patched.append(qualname)
        except Exception as exc:  # noqa: BLE001 - a probe that cannot attach says so and lets the engine run
            _write(
                "patch-error", {"status": "failed", "function": f"{module.__name__}:{qualname}", "error": _text(exc)}
            )
    if patched:
        _write("patched", {"status": "patched", "functions": [f"{module.__name__}:{q}" for q in patched]})


def _wrap(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    _ORIGINALS[name] = original

    @functools.wraps(original)
    def probed(*args: Any, **kwargs: Any) -> Any:
        if _STATE["active"] or _STATE["done"]:
            return original(*args, **kwargs)
        _STATE["active"] = True
        session = _Session(name, args[0] if args else None)
        session.start()
        try:
            return original(*args, **kwargs)
        except BaseException as exc:
            session.raised = _text(exc)
            raise
        finally:
            session.finish()
            _STATE["active"], _STATE["done"] = False, True

    return probed


# -- one recording ---------------------------------------------------------------------------------


class _Session:
    def __init__(self, function: str, runner: object) -> None:
        self.function, self.runner = function, runner
        self.reading: dict[str, Any] = {
            "schema": READING_SCHEMA,
            "function": function,
            "pid": os.getpid(),
            "status": "recorded",
            "error": None,
            "raised": None,
            "called_from": _caller_frames(),
        }
        self.raised: str | None = None
        self.platform: str | None = None
        self._markers: list[str] = []
        self.started = 0.0
        self._profiler: TorchObject = None
        self._before: dict[str, int] = {}

    def start(self) -> None:
        self.started = time.monotonic()
        try:
            import torch  # type: ignore[import-not-found]  # the engine's, not Apron's

            device = getattr(self.runner, "device", None)
            cuda = getattr(device, "type", None) == "cuda" or (device is None and torch.cuda.is_available())
            self.platform = "cuda" if cuda else "cpu"
            self.reading["platform"] = self.platform
            self.reading["rank"] = _rank(torch)
            if cuda:
                self._start_cuda(torch)
            else:
                self._start_cpu(torch)
        except Exception as exc:  # noqa: BLE001
            self._fail("starting the recording", exc)

    def finish(self) -> None:
        self.reading["seconds"] = round(time.monotonic() - self.started, 3)
        self.reading["raised"] = self.raised
        if self.reading["status"] == "recorded":
            try:
                import torch

                if self.platform == "cuda":
                    self._finish_cuda(torch)
                else:
                    self._finish_cpu(torch)
            except Exception as exc:  # noqa: BLE001
                self._fail("reading the recording", exc)
        self.reading["analysis_seconds"] = round(time.monotonic() - self.started - self.reading["seconds"], 3)
        _write("probe", self.reading)

    def _fail(self, stage: str, exc: BaseException) -> None:
        self.reading["status"] = "failed"
        self.reading["error"] = f"{stage}: {_text(exc)}"
        self.reading["traceback"] = traceback.format_exc()[-3000:]

    # -- CUDA: the caching allocator's own history ------------------------------------------------
    def _start_cuda(self, torch: ModuleType) -> None:
        self._before = _cuda_state(torch)
        torch.cuda.memory._record_memory_history(
            enabled="all", context="alloc", stacks="python", max_entries=MAX_TRACE_ENTRIES
        )

    def _finish_cuda(self, torch: ModuleType) -> None:
        try:  # FX-generated frames then carry the model source they came from (torch 2.10+)
            snapshot = torch.cuda.memory._snapshot(augment_with_fx_traces=True)
        except TypeError:
            snapshot = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        after = _cuda_state(torch)
        device = torch.cuda.current_device()
        trace = snapshot["device_traces"][device] if device < len(snapshot["device_traces"]) else []
        steps = [
            (e["action"] == "alloc", e["addr"], e["size"], e.get("frames") or [])
            for e in trace
            if e["action"] in ("alloc", "free_requested")
        ]
        self.reading.update(_analysis(steps))
        self.reading.update(
            {
                "allocator_peak_bytes": after["peak_allocated"] - self._before["allocated"],
                "start_allocated_bytes": self._before["allocated"],
                "is_trace_truncated": len(trace) >= MAX_TRACE_ENTRIES,
                "segments": _cuda_segments(snapshot["segments"], device),
                "non_torch": {
                    "start_bytes": self._before["non_torch"],
                    "end_bytes": after["non_torch"],
                    "growth_bytes": after["non_torch"] - self._before["non_torch"],
                    "basis": "(total - free from cudaMemGetInfo) - torch.cuda.memory_reserved(), before and after",
                },
                "reserved_bytes": {"start": self._before["reserved"], "end": after["reserved"]},
            }
        )
        self.reading["retained_free_bytes"] = sum(s["free_bytes"] for s in self.reading["segments"])

    # -- CPU: the profiler's memory events --------------------------------------------------------
    def _start_cpu(self, torch: ModuleType) -> None:
        from torch.profiler import ProfilerActivity, profile  # type: ignore[import-not-found]

        self._markers = _phase_markers(self.runner, self.function, torch)
        self._before = {"rss": _rss_bytes()}
        self._profiler = profile(
            activities=[ProfilerActivity.CPU], profile_memory=True, with_stack=_CPU_STACKS, record_shapes=True
        )
        self._profiler.__enter__()

    def _finish_cpu(self, torch: ModuleType) -> None:
        self._profiler.__exit__(None, None, None)
        for name in self._markers:
            vars(self.runner).pop(name, None)
        rss = _rss_bytes()
        clock = time.monotonic()
        roots = self._profiler.profiler.kineto_results.experimental_event_tree()
        self.reading["tree_seconds"] = round(time.monotonic() - clock, 3)
        allocations, ops, num_events = _profiler_events(roots)
        allocations.sort(key=lambda a: a[0])
        steps: list[Step] = [(size > 0, ptr, abs(size), chain) for _, ptr, size, _, chain in allocations]
        self.reading.update(_analysis(steps, _what_ops_saw(allocations, ops)))
        counter_peak = 0
        if allocations:
            baseline = allocations[0][3] - allocations[0][2]
            counter_peak = max(total for _, _, _, total, _ in allocations) - baseline
        torch_growth = sum(size for _, _, size, _, _ in allocations)
        self.reading.update(
            {
                "allocator_peak_bytes": counter_peak,
                "start_allocated_bytes": None,
                "is_trace_truncated": False,
                "segments": [],
                "retained_free_bytes": None,
                "num_profiler_events": num_events,
                "non_torch": {
                    "start_bytes": None,
                    "end_bytes": None,
                    "growth_bytes": rss - self._before["rss"] - torch_growth if rss and self._before["rss"] else None,
                    "basis": "resident set growth less the bytes torch still holds from the call (/proc/self/statm); "
                    "it includes the profiler's own event buffers",
                },
            }
        )


# -- reading the events ----------------------------------------------------------------------------


def _analysis(steps: list[Step], info: dict[int, Seen] | None = None) -> dict[str, Any]:
    """The peak over (is_alloc, addr, bytes, frames) steps, overall and per phase (the method of the
    runner the wrapped function was in when it allocated: _dummy_run, _dummy_sampler_run, an encoder):
    the blocks alive at each peak, and the largest blocks the phase allocated at all. Blocks from before
    the call are not part of its transient: their frees are skipped. `info` maps an allocation's step to
    what the recorder saw of it afterwards: (shape, dtype, the operators that read it)."""
    info = info or {}
    live: dict[int, int] = {}
    running = 0
    peaks: dict[str, tuple[int, int]] = {}  # phase -> (bytes, step index)
    made: dict[str, list[Made]] = {}  # phase -> [(bytes, frames, alloc step)]
    for i, (is_alloc, addr, size, frames) in enumerate(steps):
        if is_alloc:
            live[addr] = size
            running += size
            phase = _phase(frames)
            made.setdefault(phase, []).append((size, frames, i))
            if running > peaks.get(phase, (-1, -1))[0]:
                peaks[phase] = (running, i)
        elif addr in live:
            running -= live.pop(addr)
    phases: list[dict[str, Any]] = []
    for phase, blocks in made.items():
        size, at = peaks[phase]
        alive = sorted(_live_at(steps, at).values(), key=lambda b: (-b[0], b[2]))
        out = [_block(b, frames, info.get(i)) for b, frames, i in alive[:MAX_BLOCKS]]
        if len(alive) > MAX_BLOCKS:
            rest = alive[MAX_BLOCKS:]
            out.append({"bytes": sum(b for b, _, _ in rest), "frames": [f"{len(rest)} smaller blocks"], "op": None})
        phases.append({"name": phase, "peak_bytes": size, "blocks": out, "allocated": _largest(blocks, info)})
    top = max(phases, key=lambda p: p["peak_bytes"], default=None)
    return {
        "peak_bytes": top["peak_bytes"] if top else 0,
        "peak_phase": top["name"] if top else None,
        "phases": phases,
        "num_events": len(steps),
    }


def _largest(blocks: list[Made], info: dict[int, Seen], limit: int = MAX_ALLOCATED) -> list[dict[str, Any]]:
    """The phase's largest allocations; alike ones (bytes, shape, producing and reading operators, first
    frame) are listed once with their count."""
    groups: dict[str, dict[str, Any]] = {}
    for size, frames, i in blocks:
        block = _block(size, frames, info.get(i))
        key = json.dumps([size, block.get("shape"), block["op"], block.get("used_by"), block["frames"][:1]])
        if key in groups:
            groups[key]["count"] += 1
        else:
            groups[key] = {**block, "count": 1, "_order": i}
    ordered = sorted(groups.values(), key=lambda b: (-b["bytes"], b["_order"]))[:limit]
    return [{k: v for k, v in b.items() if k != "_order"} for b in ordered]


def _phase(frames: Sequence[Frame]) -> str:
    """The method of the runner the wrapped call was in when this block was allocated: the outermost
    phase marker (CPU), else the frame just inside the wrapped function, library frames skipped."""
    markers = [f for f in frames if isinstance(f, str) and f.startswith(PHASE_PREFIX)]
    if markers:
        return markers[-1][len(PHASE_PREFIX) :]
    names = [_function_name(f) for f in frames]
    for j, name in enumerate(names):
        if name in _WRAPPED_NAMES:
            for frame, inner in reversed(list(zip(frames[:j], names[:j], strict=True))):
                path = str(frame.get("filename", "")) if isinstance(frame, dict) else frame
                if inner and not _is_library(path):
                    return inner
            return name
    return _WRAPPED_LABEL


def _phase_markers(runner: object, function: str, torch: ModuleType) -> list[str]:
    """Mark the parts of the run for the profiler without its Python tracer: each method of the runner
    that the wrapped function names in its code is shadowed, on this instance and for this call only, by
    one that runs it inside torch.profiler.record_function("apron.phase:NAME"). The original runs
    unchanged; the instance attributes are removed when the call ends."""
    import inspect

    original = _ORIGINALS.get(function)
    if runner is None or original is None or not hasattr(runner, "__dict__"):
        return []
    added = []
    for name in inspect.unwrap(original).__code__.co_names:
        if name.startswith("__") or name in vars(runner) or not inspect.isfunction(getattr(type(runner), name, None)):
            continue
        bound = getattr(runner, name)

        def marked(
            *args: Any, _bound: Callable[..., Any] = bound, _label: str = PHASE_PREFIX + name, **kwargs: Any
        ) -> Any:
            with torch.profiler.record_function(_label):
                return _bound(*args, **kwargs)

        try:
            setattr(runner, name, marked)
        except Exception:  # noqa: BLE001 - a runner that refuses instance attributes goes unmarked
            continue
        added.append(name)
    return added


def _function_name(frame: Frame) -> str:
    if isinstance(frame, dict):
        return str(frame.get("name") or "")
    head, sep, name = frame.partition("): ")
    return name if sep and "(" in head else ""


def _live_at(steps: list[Step], at: int) -> dict[int, Made]:
    """{addr: (bytes, frames, alloc step)} alive just after step `at`."""
    live: dict[int, Made] = {}
    for i, (is_alloc, addr, size, frames) in enumerate(steps):
        if i > at:
            break
        if is_alloc:
            live[addr] = (size, frames, i)
        else:
            live.pop(addr, None)
    return live


def _block(size: int, frames: Sequence[Frame], seen: Seen | None) -> dict[str, Any]:
    texts, op = _frames(frames)
    block: dict[str, Any] = {"bytes": size, "frames": texts, "op": op}
    source = _source_hint(frames)
    if source:
        block["source"] = source
    if seen is not None:
        block["shape"], block["dtype"], block["used_by"] = seen
    return block


def _frames(frames: Sequence[Frame]) -> tuple[list[str], str | None]:
    """Frame texts (innermost first, library frames left out) and the allocating operator."""
    op: str | None = None
    texts: list[str] = []
    in_ops = True
    for frame in frames:
        if isinstance(frame, str):  # the profiler's names: operators, "file.py(12): fn", "nn.Module: X"
            is_op = "::" in frame and "(" not in frame
            if is_op and in_ops:
                op = frame  # the outermost operator of the innermost run: aten::linear, not aten::mm
                continue
            in_ops = in_ops and is_op
            if not is_op and not _is_library(frame) and not frame.startswith(("<built-in", PHASE_PREFIX)):
                texts.append(frame)
        else:
            name = f"{_short(frame['filename'])}:{frame['line']} {frame['name']}"
            if not _is_library(frame["filename"]):
                texts.append(name)
    return texts[:MAX_FRAMES], op


def _source_hint(frames: Sequence[Frame]) -> str | None:
    """The line that allocated (CUDA's history records the current line of each frame; the profiler's
    frames name only the function): for generated code (torch.fx, inductor) the comment above it that
    names the original source, `# File: .../gemma2.py:95 in forward, code: gate_up, _ = ...`."""
    for frame in frames:
        if not isinstance(frame, dict):
            return None
        if frame.get("fx_original_trace"):
            return str(frame["fx_original_trace"]).strip().splitlines()[-1].strip()[:300]
        filename, line = _file_line(frame)
        if not filename or _is_library(filename):
            continue
        for number in range(line, max(line - 40, 0), -1):
            text = linecache.getline(filename, number).strip()
            if text.startswith(_SOURCE_MARKS):
                return text[:300]
        return linecache.getline(filename, line).strip()[:300] or None
    return None


def _file_line(frame: Frame) -> tuple[str | None, int]:
    if isinstance(frame, dict):
        return frame.get("filename"), int(frame.get("line") or 0)
    head, sep, _ = frame.partition("): ")
    if not sep or "(" not in head:
        return None, 0
    filename, _, number = head.rpartition("(")
    return (filename, int(number)) if number.isdigit() else (None, 0)


def _is_library(name: str) -> bool:
    return any(part in name for part in _LIBRARY_PARTS) or name.startswith("torch/")


def _short(path: str) -> str:
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def _profiler_events(roots: list[TorchObject]) -> tuple[list[Allocation], list[tuple[int, TorchObject]], int]:
    """Allocation events (time, ptr, signed bytes, counter total, parent chain), and the operator
    events (start time, event) whose inputs say what shape a block had."""
    from torch._C._profiler import _EventType  # type: ignore[import-not-found]

    allocations: list[Allocation] = []
    ops: list[tuple[int, TorchObject]] = []
    stack, count = list(roots), 0
    while stack:
        event = stack.pop()
        count += 1
        stack.extend(event.children)
        tag = event.tag
        if tag == _EventType.Allocation:
            fields = event.extra_fields
            if str(fields.device).startswith("cpu") and fields.alloc_size:
                allocations.append(
                    (event.start_time_ns, fields.ptr, fields.alloc_size, fields.total_allocated, _chain(event))
                )
        elif tag == _EventType.TorchOp:
            ops.append((event.start_time_ns, event))
    ops.sort(key=lambda o: o[0])
    return allocations, ops, count


def _chain(event: TorchObject, depth: int = 64) -> list[str]:
    names: list[str] = []
    parent = event.parent
    while parent is not None and len(names) < depth:
        names.append(parent.name)
        parent = parent.parent
    return names


def _what_ops_saw(allocations: list[Allocation], ops: list[tuple[int, TorchObject]]) -> dict[int, Seen]:
    """{alloc step: (shape, dtype, reading operators)} from one pass over the operators in time order:
    a block's shape is the first input on its storage, while it was alive, that spans all its bytes (else
    the first such input); its readers are the first MAX_READERS distinct operators that took it in."""
    from torch._C._profiler import _TensorMetadata

    spans: dict[int, list[tuple[int, float, int, int]]] = {}  # ptr -> [(alloc time, free time, step, bytes)]
    open_at: dict[int, tuple[int, int, int]] = {}
    for i, (time_ns, ptr, size, _, _) in enumerate(allocations):
        if size > 0:
            open_at[ptr] = (time_ns, i, size)
        elif ptr in open_at:
            start, step, nbytes = open_at.pop(ptr)
            spans.setdefault(ptr, []).append((start, time_ns, step, nbytes))
    for ptr, (start, step, nbytes) in open_at.items():
        spans.setdefault(ptr, []).append((start, float("inf"), step, nbytes))
    seen: dict[int, list[Any]] = {}  # step -> [shape, dtype, whole, readers]
    for time_ns, event in ops:
        name = event.name
        for value in event.extra_fields.inputs:
            for tensor in value if isinstance(value, list) else [value]:
                if not isinstance(tensor, _TensorMetadata) or tensor.storage_data_ptr not in spans:
                    continue
                for start, end, step, nbytes in spans[tensor.storage_data_ptr]:
                    if start <= time_ns <= end:
                        _note_use(seen, step, nbytes, tensor, name)
                        break
    return {step: (shape, dtype, readers) for step, (shape, dtype, _, readers) in seen.items()}


def _note_use(seen: dict[int, list[Any]], step: int, nbytes: int, tensor: TorchObject, op_name: str) -> None:
    sizes, dtype = list(tensor.sizes), tensor.dtype
    whole = _numel(sizes) * dtype.itemsize == nbytes
    entry = seen.get(step)
    if entry is None or (whole and not entry[2]):
        readers = entry[3] if entry else []
        entry = seen[step] = [sizes, str(dtype).replace("torch.", ""), whole, readers]
    if op_name not in entry[3] and op_name not in _VIEW_OPS and len(entry[3]) < MAX_READERS:
        entry[3].append(op_name)


def _numel(sizes: list[int]) -> int:
    n = 1
    for s in sizes:
        n *= s
    return n


# -- the machine ---------------------------------------------------------------------------------------


def _cuda_state(torch: ModuleType) -> dict[str, int]:
    stats = torch.cuda.memory_stats()
    free, total = torch.cuda.mem_get_info()
    reserved = torch.cuda.memory_reserved()
    return {
        "allocated": int(stats.get("allocated_bytes.all.current", 0)),
        "peak_allocated": int(stats.get("allocated_bytes.all.peak", 0)),
        "reserved": int(reserved),
        "non_torch": int(total - free - reserved),
    }


def _cuda_segments(segments: list[dict[str, Any]], device: int) -> list[dict[str, Any]]:
    """Segments holding a live block and free bytes: what empty_cache() cannot give back."""
    out: list[dict[str, Any]] = []
    for segment in segments:
        if segment.get("device", device) != device or not segment.get("active_size"):
            continue
        free = int(segment["total_size"]) - int(segment["active_size"])
        if free <= 0:
            continue
        live = [
            {"bytes": int(b["size"]), "frames": _frames(b.get("frames") or [])[0]}
            for b in segment.get("blocks", [])
            if str(b.get("state", "")).startswith("active")
        ]
        out.append({"bytes": int(segment["total_size"]), "free_bytes": free, "live": live[:20]})
    return sorted(out, key=lambda s: -s["free_bytes"])


def _rank(torch: ModuleType) -> int | None:
    try:
        dist = torch.distributed
        return int(dist.get_rank()) if dist.is_available() and dist.is_initialized() else 0
    except Exception:  # noqa: BLE001
        return None


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _caller_frames() -> list[str]:
    frames = traceback.extract_stack()[:-3]
    return [f"{_short(f.filename)}:{f.lineno} {f.name}" for f in frames if "vllm" in f.filename][-6:]


def _text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:1000]


def _write(kind: str, document: dict[str, Any]) -> None:
    if not _OUT_DIR:
        return
    try:
        os.makedirs(_OUT_DIR, exist_ok=True)
        path = os.path.join(_OUT_DIR, f"{kind}-{os.getpid()}.json")
        with open(path + ".tmp", "w") as handle:
            json.dump(document, handle)
        os.replace(path + ".tmp", path)
    except Exception:  # noqa: BLE001 - the probe must never stop the engine
        pass


def _chain_next_sitecustomize() -> None:
    """This file shadows any sitecustomize later on sys.path (Debian's, a venv's): run that one too."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception:  # noqa: BLE001
        pass


if _TARGETS and _OUT_DIR:
    sys.meta_path.insert(0, _Finder())
if __name__ == "sitecustomize":
    import importlib.util

    _chain_next_sitecustomize()
