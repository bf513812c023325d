"""Failure families: what kind of failure an error line is, and the typed values it carries.

Three sources, tried in this order:
1. Wrappers: errors that only report an earlier one ("Engine core initialization failed. See root
   cause above"). They are never the decisive error while another error exists.
2. The engine's own refusal templates, read from the pinned release's source by the engine facts
   (`refusals`). Every template is a family; a new release brings its messages without code. The
   families rules and reports talk about get a stable name through a signature (a literal phrase of
   the template, stable across releases); the others are named after their first words. A named
   family also carries the template as of the releases we read, used only when the facts of the
   version at hand lack it (no facts installed, or a message raised through a variable).
3. Observed failures that no vLLM template produces: PyTorch's caching-allocator OOM, CUDA and NCCL
   errors, graph-capture failures, and the harness's own (download, machine never started).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from apron.frozen import frozen
from apron.rules.pattern import coerce

# A failure's fields as the rules and the records read them: JSON values by field name.
Fields = dict[str, Any]


@frozen
class Family:
    name: str
    blame: str  # one of BLAMES: the host, Apron's harness, the model (its files, its settings), unknown
    summary: str
    signatures: tuple[str, ...] = ()  # literal phrases of the engine's template
    fallback_templates: tuple[tuple[str, str], ...] = ()  # (exception, template) as of vLLM 0.29-0.33
    renames: tuple[tuple[str, str], ...] = ()  # template group name -> typed field name
    check: str = ""  # what to look at, for a failure no flag change fixes


_KV_HINT = (
    "Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or "
    "decreasing `max_model_len` when initializing the engine. See "
    "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
)

# What to look at when the checkpoint's files are at fault (no flag change fixes them).
_TOKENIZER_CHECK = (
    "the tokenizer files the checkpoint's tokenizer_config.json (tokenizer_class) needs, whole and from one "
    "release: tokenizer.json for a fast tokenizer (PreTrainedTokenizerFast, most *TokenizerFast), "
    "tokenizer.model for a sentencepiece one (Llama, Mistral, Gemma, T5), vocab.json with merges.txt for a "
    "GPT-2 style BPE one; compare their sizes with the repo's and download them again, or pick a revision "
    "that has them; a tokenizer.json written by a newer tokenizers release needs that release on the target"
)
_TOKENIZER_CLASS_CHECK = (
    "tokenizer_class (and auto_map) in the checkpoint's tokenizer_config.json: a class of the repo's own code "
    "needs --trust-remote-code (if you trust it), one of a newer transformers needs that transformers on the "
    "target; or a revision whose tokenizer files name a class this release has"
)
_MODEL_PATH_CHECK = (
    "the model argument: a Hub repo id (org/name) that exists, at a revision that exists, or a folder that "
    "holds config.json beside the weights (an interrupted download leaves it out)"
)
_FILE_MISSING_CHECK = (
    "the file the message names: download it into the checkpoint folder (with what the repo lists beside "
    "it), or pick a revision that has it"
)
_JSON_CHECK = (
    "each JSON file of the checkpoint (config.json, generation_config.json, tokenizer_config.json, "
    "tokenizer.json, model.safetensors.index.json) and each safetensors header: one cut short by a download "
    "or left half-edited does not parse (`python -m json.tool FILE`, or `apron plan FOLDER`, which reads "
    "every header); download it again"
)
_WEIGHTS_CHECK = (
    "each *.safetensors file's size against the repo's listing (a download cut short keeps the header and "
    "loses the data, or loses part of the header); `apron plan FOLDER` names the file; download it again"
)
_GATED_CHECK = (
    "accept the repo's terms on the Hub with the account whose token the target uses, and give the machine "
    "that boots HF_TOKEN (or download the checkpoint there first)"
)
_OFFLINE_CHECK = (
    "the target runs with HF_HUB_OFFLINE=1 (or local_files_only) and its cache lacks the files: download the "
    "checkpoint there first, or unset HF_HUB_OFFLINE"
)
_HUB_UNREACHABLE_CHECK = "the target's network: it could not reach the Hub (HF_ENDPOINT, a proxy, DNS, a firewall)"

NAMED: tuple[Family, ...] = (
    Family(
        "kv_cache_too_small",
        "model",
        "one request at max_model_len needs more KV cache than is left",
        ("To serve at least one request with the model's max seq len",),
        (
            (
                "ValueError",
                "To serve at least one request with the model's max seq len ({max_model_len}), "
                "({format_gib(needed_memory)} GiB KV cache is needed, which is larger than the available KV cache "
                "memory ({format_gib(available_memory)} GiB). {estimated_msg}" + _KV_HINT,
            ),
        ),
        (("needed_memory_gib", "needed_gib"), ("available_memory_gib", "available_gib")),
    ),
    Family(
        "no_kv_cache_memory",
        "model",
        "nothing is left for the KV cache after weights and activations",
        ("No available memory for the cache blocks",),
        (
            (
                "ValueError",
                "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                "initializing the engine (this flag also controls CPU memory reservation on the CPU backend, despite "
                "its name). See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
            ),
        ),
    ),
    Family(
        "auto_fit_no_memory",
        "model",
        "--max-model-len auto found no memory for a single token",
        ("Cannot auto-fit max_model_len",),
        (
            (
                "ValueError",
                "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single "
                "token. Try increasing `gpu_memory_utilization`.",
            ),
        ),
    ),
    Family(
        "mamba_blocks_below_max_num_seqs",
        "model",
        "max_num_seqs exceeds the hybrid's state blocks",
        ("exceeds available Mamba cache blocks",),
        (
            (
                "ValueError",
                "max_num_seqs ({max_num_reqs}) exceeds available Mamba cache blocks "
                "({kv_cache_config.num_blocks}). Each decode sequence requires one Mamba cache block, so CUDA graph "
                "capture cannot proceed. Please lower max_num_seqs to at most {kv_cache_config.num_blocks} or "
                "increase gpu_memory_utilization.",
            ),
        ),
        (("max_num_reqs", "max_num_seqs"),),
    ),
    Family(
        "max_model_len_over_derived",
        "model",
        "--max-model-len is above the model's derived maximum",
        ("To allow overriding this maximum",),
        (
            (
                "ValueError",
                "{msg} To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. {warning}",
            ),
        ),
    ),
    Family(
        "float16_unsupported",
        "model",
        "the model type refuses float16",
        ("does not support float16",),
        (("ValueError", "The model type {model_type!r} does not support float16. Reason: {reason}"),),
    ),
    Family(
        "bfloat16_unsupported",
        "model",
        "bfloat16 needs compute capability 8.0",
        ("Bfloat16 is only supported on GPUs with compute capability of at least 8.0",),
        (
            (
                "ValueError",
                "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your "
                "{gpu_name} GPU {compute_str}. You can use float16 instead by explicitly setting the `dtype` flag in "
                "CLI, for example: --dtype=half.",
            ),
        ),
    ),
    Family(
        "architecture_unsupported",
        "model",
        "this vLLM release does not register the architecture",
        (
            "are not supported for now. Supported architectures",
            "was supported in vLLM until",
            "is not supported in-tree anymore",
        ),
        (
            (
                "ValueError",
                "Model architectures {architectures} are not supported for now. Supported "
                "architectures: {all_supported_archs}",
            ),
        ),
    ),
    Family(
        "quantization_capability",
        "model",
        "the GPU is below the quantization method's minimum capability",
        ("is not supported for the current GPU. Minimum capability",),
        (
            (
                "ValueError",
                "The quantization method {model_config.quantization} is not supported for the current "
                "GPU. Minimum capability: {quant_config.get_min_capability()}. Current capability: {capability}.",
            ),
        ),
    ),
    Family(
        "tp_heads_indivisible",
        "model",
        "the attention heads do not divide by the tensor-parallel size",
        ("Total number of attention heads (",),
        (
            (
                "ValueError",
                "Total number of attention heads ({total_num_attention_heads}) must be divisible by "
                "tensor parallel size ({tensor_parallel_size}).",
            ),
        ),
    ),
    Family(
        "batched_tokens_below_max_model_len",
        "model",
        "max_num_batched_tokens is below max_model_len",
        ("is smaller than max_model_len",),
        (
            (
                "ValueError",
                "max_num_batched_tokens ({self.max_num_batched_tokens}) is smaller than max_model_len "
                "({max_model_len}). This effectively limits the maximum sequence length to max_num_batched_tokens and "
                "makes vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease "
                "max_model_len.",
            ),
        ),
    ),
    Family(
        "batched_tokens_below_max_num_seqs",
        "model",
        "max_num_batched_tokens is below max_num_seqs",
        ("must be greater than or equal to max_num_seqs",),
        (
            (
                "ValueError",
                "max_num_batched_tokens ({self.max_num_batched_tokens}) must be greater than or equal to "
                "max_num_seqs ({self.max_num_seqs}).",
            ),
        ),
    ),
    Family(
        "mm_item_over_batched_tokens",
        "model",
        "one multimodal item needs more tokens than a batch holds",
        ("Chunked MM input disabled but max_tokens_per_mm_item",),
        (
            (
                "ValueError",
                "Chunked MM input disabled but max_tokens_per_mm_item ({max_tokens_per_mm_item}) is "
                "larger than max_num_batched_tokens ({scheduler_config.max_num_batched_tokens}). Please increase "
                "max_num_batched_tokens.",
            ),
        ),
    ),
    Family(
        "sampler_warmup_oom",
        "model",
        "out of memory warming up the sampler over max_num_seqs rows",
        ("CUDA out of memory occurred when warming up sampler",),
        (
            (
                "RuntimeError",
                "CUDA out of memory occurred when warming up sampler with {num_reqs} dummy requests. "
                "Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.",
            ),
        ),
    ),
    Family(
        "pooler_warmup_oom",
        "model",
        "out of memory warming up the pooler over max_num_seqs rows",
        ("CUDA out of memory occurred when warming up pooler",),
        (
            (
                "RuntimeError",
                "CUDA out of memory occurred when warming up pooler (task={task!r}) with {num_reqs} "
                "dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing "
                "the engine.",
            ),
        ),
    ),
    Family(
        "tokenizer_mode_mistral_required",
        "model",
        "the model needs the Mistral tokenizer",
        ("requires `--tokenizer-mode mistral`", "mistral_format=True is not supported with tokenizer_mode='hf'"),
        (("ValueError", "This model requires `--tokenizer-mode mistral`"),),
    ),
    Family(
        "invalid_reasoning_parser",
        "model",
        "the reasoning parser named is not registered",
        ("invalid reasoning parser:", "reasoning_parser_name="),
        (
            (
                "KeyError",
                "invalid reasoning parser: {reasoning_parser} (chose from {{ {','.join(valid_reasoning_parsers)} }})",
            ),
        ),
    ),
    Family(
        "reasoning_parser_required",
        "model",
        "a request asked for thinking control without a reasoning parser",
        ("Please set --reasoning-parser",),
        (
            (
                "VLLMValidationError",
                "thinking_token_budget is set but reasoning_config is not configured. Please "
                "set --reasoning-parser and/or --reasoning-config to use thinking_token_budget.",
            ),
        ),
    ),
    Family(
        "gpu_startup_free_memory",
        "host",
        "the GPU had less free memory at start-up than requested",
        ("on startup is less than desired GPU memory utilization",),
        (
            (
                "ValueError",
                "Free memory on device {init_snapshot.device_} ({format_gib(init_snapshot.free_memory)}/"
                "{format_gib(init_snapshot.total_memory)} GiB) on startup is less than desired GPU memory utilization "
                "({cache_config.gpu_memory_utilization}, {format_gib(requested_memory)} GiB). Decrease GPU memory "
                "utilization or reduce GPU memory used by other processes.",
            ),
        ),
        (("free_memory_gib", "free_gib"), ("total_memory_gib", "total_gib"), ("requested_memory_gib", "requested_gib")),
    ),
    Family(
        "cpu_startup_memory",
        "host",
        "the CPU node had less free memory at start-up than requested",
        ("on startup is less than desired CPU memory utilization",),
        (
            (
                "ValueError",
                "Available memory on node {cpu_core.numa_node} ({format_gib(available_memory)}/"
                "{format_gib(memory_status.total_memory)} GiB) on startup is less than desired CPU memory utilization "
                "({vllm_config.cache_config.gpu_memory_utilization}, {format_gib(self.requested_cpu_memory)} GiB). On "
                "the CPU backend, the `--gpu-memory-utilization` flag controls the fraction of CPU memory reserved "
                "(despite its name). To resolve: decrease `--gpu-memory-utilization` (e.g. `--gpu-memory-utilization "
                "0.5`) or reduce CPU memory used by other processes.",
            ),
        ),
        (
            ("available_memory_gib", "free_gib"),
            ("total_memory_gib", "total_gib"),
            ("requested_cpu_memory_gib", "requested_gib"),
        ),
    ),
    Family(
        "cpu_kv_allocation",
        "model",
        "the CPU engine's KV share of its memory request is negative or too small",
        ("on kv cache allocation is less than requested memory for kv",),
        (
            (
                "ValueError",
                "Available memory on node {cpu_core.numa_node} ({format_gib(available_memory)}/"
                "{format_gib(memory_status.total_memory)} GiB) on kv cache allocation is less than requested memory for "
                "kv ({format_gib(requested_memory_for_kv)}/{format_gib(self.requested_cpu_memory)} GiB). Reduce CPU "
                "memory used by other processes.",
            ),
        ),
        (
            ("available_memory_gib", "free_gib"),
            ("total_memory_gib", "total_gib"),
            ("requested_memory_for_kv_gib", "kv_gib"),
            ("requested_cpu_memory_gib", "requested_gib"),
        ),
    ),
    Family(
        "model_weights_missing",
        "model",
        "the model folder holds no weights vLLM can load",
        ("Cannot find any model weights",),
        (("RuntimeError", "Cannot find any model weights with `{model_name_or_path}`"),),
    ),
    Family(
        "nccl_error",
        "host",
        "NCCL or NVSwitch failed (start-up or collective)",
        ("NCCL error: ",),
        (("RuntimeError", "NCCL error: {error_str}"),),
    ),
    # tokenizers/hf.py (0.29-0.33) raises this when transformers says the class "does not exist or
    # is not currently imported".
    Family(
        "tokenizer_class_unavailable",
        "model",
        "the tokenizer class the checkpoint names is not in this transformers release",
        ("Failed to load the tokenizer. If the tokenizer is a custom tokenizer",),
        check=_TOKENIZER_CLASS_CHECK,
    ),
    # transformers_utils/config.py (0.29-0.33): neither a repo id the Hub knows nor a folder with a config.
    Family(
        "model_path_invalid",
        "harness",
        "the model path or repo id the engine was given does not resolve",
        ("Invalid repository ID or local directory specified",),
        check=_MODEL_PATH_CHECK,
    ),
)


@frozen
class Observed:
    """A failure no vLLM template produces, recognised by a regex over `Exception: message`."""

    name: str
    blame: str
    summary: str
    regex: re.Pattern[str]
    check: str = ""  # what to look at, for a failure no flag change fixes


def _observed(name: str, blame: str, summary: str, regex: str, check: str = "") -> Observed:
    return Observed(name, blame, summary, re.compile(regex, re.I), check)


# Wrappers only point at an earlier error; the decisive error is never one of these while another
# exists, and a log that holds nothing else gets the family CAUSE_NOT_IN_LOG. Their text is the
# engine's own: v1/engine/utils.py wait_for_engine_startup, v1/engine/core.py ("EngineCore failed to
# start."), v1/executor/multiproc_executor.py (WorkerProc, "Worker failed with error '...'", which
# carries the cause inline and is unwrapped first: apron.rules.classify), v1/executor/ray_executor_v2.py
# ("Worker {i} failed to initialize: {result}", the status dict of a worker, no cause).
WRAPPERS: tuple[Observed, ...] = (
    _observed(
        "engine_core_init_failed",
        "unknown",
        "the engine core did not start (see the error before it)",
        r"Engine core initialization failed|EngineCore failed to start|"
        r"Frontend process failed during engine core initialization",
    ),
    _observed(
        "engine_dead",
        "unknown",
        "the engine core died (see the error before it)",
        r"EngineDeadError|EngineCore encountered (?:an issue|a fatal error)",
    ),
    _observed(
        "worker_died",
        "unknown",
        "a worker process died (see the error before it)",
        r"died unexpectedly|died with exit code|Worker failed with error|check the stack trace above|"
        r"WorkerProc (?:initialization failed|failed to start|failed\b|hit an exception)|RayWorkerProc failed|"
        r"Worker \d+ failed to initialize",
    ),
)
# The one family of a log whose only errors are wrappers: its cause scrolled out or was cut off.
CAUSE_NOT_IN_LOG = "cause_not_in_log"
# Last resort: a process stopped; decisive only when the log holds no other error.
PROCESS_EXIT = _observed(
    "process_exit",
    "unknown",
    "a process exited or was cancelled",
    r"^(?:SystemExit|KeyboardInterrupt|(?:asyncio\.)?CancelledError|BrokenPipeError)\b",
)

# Tried in order: the host's failures first (an NCCL or ECC failure surfaces as an engine exception
# too, and a full disk as a safetensors error), then the model's, then the harness's.
OBSERVED: tuple[Observed, ...] = (
    _observed(
        "instances_unavailable",
        "host",
        "no machine with the requested GPU could be rented, or it was taken away",
        r"no longer any instances available|no instances available|ResourcesUnavailableError|"
        r"InsufficientInstanceCapacity|Failed to provision|no (?:GPU )?capacity|"
        r"instance (?:failed to start|was preempted|terminated)",
    ),
    _observed(
        "nccl_error",
        "host",
        "NCCL or NVSwitch failed (start-up or collective)",
        r"\bNCCL error\b|\bnccl(?:UnhandledCuda|System|Internal|InvalidUsage|Remote)Error\b|DistBackendError"
        r"|NCCL WARN|NVSwitch|fabric ?manager|CUDA error: system not yet initialized|"
        r"unhandled system error.*nccl|ProcessGroupNCCL.*(?:timeout|abort)",
    ),
    _observed(
        "gpu_hardware_error",
        "host",
        "the GPU reported a hardware error (ECC, Xid, fell off the bus)",
        r"uncorrectable ECC|\bECC error|\bXid\b|fallen off the bus|GPU is lost|"
        r"CUDA error: unspecified launch failure|row remapp",
    ),
    _observed(
        "no_cuda_device",
        "host",
        "no usable CUDA device or driver on the machine",
        r"No CUDA GPUs are available|CUDA driver initialization failed|no NVIDIA driver|NVIDIA-SMI has failed|"
        r"cudaErrorNoDevice|CUDA error: no CUDA-capable device|Failed to infer device type",
    ),
    _observed(
        "disk_full", "host", "the disk is full", r"No space left on device|ENOSPC|\[Errno 28\]|Disk quota exceeded"
    ),
    # huggingface_hub 2.4.0 file_download.py (LocalEntryNotFoundError) and transformers 5.19.0
    # utils/hub.py cached_files, raised when the target cannot reach the Hub and has no cached copy.
    _observed(
        "hub_unreachable",
        "host",
        "the machine that boots could not reach the Hugging Face Hub for the checkpoint's files",
        r"An error happened while trying to locate the file on the Hub|We couldn't connect to '[^']*' to load "
        r"the files|There was a specific connection error when trying to load",
        _HUB_UNREACHABLE_CHECK,
    ),
    _observed(
        "cudagraph_capture_failed",
        "model",
        "CUDA-graph capture failed",
        r"stream is capturing|cudaErrorStreamCapture\w*|graph capture failed|failed to capture cuda ?graph"
        r"|during (?:cuda ?graph )?capture\b",
    ),
    _observed(
        "cuda_oom",
        "model",
        "the CUDA caching allocator ran out of memory",
        r"CUDA out of memory|OutOfMemoryError|\bCUDA OOM\b",
    ),
    _observed(
        "cuda_illegal_memory_access",
        "model",
        "a kernel made an illegal memory access (opaque kernel error)",
        r"illegal memory access",
    ),
    _observed(
        "no_kernel_image",
        "model",
        "the wheel has no kernel for this GPU's architecture",
        r"no kernel image is available",
    ),
    _observed("cuda_error", "unknown", "a CUDA runtime error", r"CUDA error: (?P<cuda_error>[^.\n]+)"),
    # The tokenizer libraries' own words (tokenizers 0.23.3 and 0.19.1, transformers 5.19.0 and 4.46.3,
    # sentencepiece 0.2.3, tiktoken 0.14.0; the texts are quoted in docs/rules.md with their sources).
    _observed(
        "tokenizer_files_invalid",
        "model",
        "the tokenizer's files are missing, incomplete or do not fit together",
        r"data did not match any variant of untagged enum (?:Py)?(?:Model|PreTokenizer|Normalizer|Decoder|"
        r"PostProcessor|Merge)\w*|Error while initializing (?:BPE|WordPiece|WordLevel|Unigram)|"
        r"Token `[^`]*` out of vocabulary|Merges text file invalid at line|`vocab` and `merges` must be both|"
        r"Couldn't instantiate the backend tokenizer|could not parse ModelProto|"
        r"Unable to load (?:vocabulary from file|tokenizer model from SPM)|Error parsing line b?['\"].*['\"] in \S",
        _TOKENIZER_CHECK,
    ),
    _observed(
        "tokenizer_class_unavailable",
        "model",
        "the tokenizer class the checkpoint names is not in this transformers release",
        r"Tokenizer class \w+ (?:does not exist or )?is not currently imported",
        _TOKENIZER_CLASS_CHECK,
    ),
    # transformers utils/hub.py cached_files (4.46.3, 5.19.0).
    _observed(
        "checkpoint_file_missing",
        "model",
        "a file the checkpoint needs is not in its folder or repo",
        r"does not appear to have (?:a file named (?P<file>\S+?)\.?(?:\s|$)|files named)|"
        r"Entry Not Found for url|(?<![A-Za-z])(?:Remote)?EntryNotFoundError",
        _FILE_MISSING_CHECK,
    ),
    # CPython json/decoder.py: "%s: line %d column %d (char %d)".
    _observed(
        "checkpoint_json_invalid",
        "model",
        "a JSON file of the checkpoint does not parse (cut short or half-edited)",
        r"(?:Expecting (?:value|',' delimiter|':' delimiter|property name enclosed in double quotes)|"
        r"Unterminated string starting at|Extra data|Invalid control character at|Invalid \\escape): "
        r"line \d+ column \d+ \(char \d+\)",
        _JSON_CHECK,
    ),
    _observed(
        "download_incomplete",
        "harness",
        "the weights download was incomplete",
        r"DOWNLOAD_INCOMPLETE|IncompleteRead|Consistency check failed|file should be of size|ChunkedEncodingError|"
        r"download (?:failed|incomplete)",
    ),
    # safetensors 0.8.0 prints "Error while deserializing header: <reason>" (header too small, header too
    # large, invalid header length, incomplete metadata, file not fully covered, ...); 0.4.3 the reason's
    # name (MetadataIncompleteBuffer, HeaderTooSmall, ...).
    _observed(
        "weights_corrupt",
        "harness",
        "a safetensors file is truncated or corrupt",
        r"SafetensorError|Error while deserializing header|incomplete metadata, file not fully covered|"
        r"HeaderTooLarge|HeaderTooSmall|MetadataIncompleteBuffer|InvalidHeaderDeserialization|InvalidHeaderLength",
        _WEIGHTS_CHECK,
    ),
    _observed(
        "engine_not_installed",
        "harness",
        "the engine is not installed where the boot ran",
        r"vllm: (?:command )?not found|no vllm executable|No module named 'vllm'",
    ),
    _observed("port_in_use", "harness", "the engine's port was already taken", r"Address already in use|\[Errno 98\]"),
    # huggingface_hub 2.4.0 utils/_http.py hf_raise_for_status, transformers 5.19.0 utils/hub.py.
    _observed(
        "gated_repo",
        "harness",
        "the checkpoint's repo is gated and the machine that boots has no token with access",
        r"GatedRepoError|Cannot access gated repo for url|You are trying to access a gated repo|"
        r"is a gated repository\. Make sure to request access|Access to model \S+ is restricted",
        _GATED_CHECK,
    ),
    _observed(
        "hub_offline_not_cached",
        "harness",
        "the Hub is switched off on the machine that boots (HF_HUB_OFFLINE) and its cache lacks the files",
        r"outgoing traffic has been disabled|offline mode is enabled\. To disable it",
        _OFFLINE_CHECK,
    ),
    _observed(
        "model_path_invalid",
        "harness",
        "the model path or repo id the engine was given does not resolve",
        r"Repo id must be in the form|is not a local folder and is not a valid model identifier|"
        r"Repository Not Found for url|RepositoryNotFoundError|Revision Not Found for url|"
        r"is not a valid git identifier \(branch name, tag name or commit id\)",
        _MODEL_PATH_CHECK,
    ),
    _observed("config_invalid_json", "model", "the checkpoint's config is not valid JSON", r"is not a valid JSON file"),
    _observed(
        "engine_startup_stall",
        "unknown",
        "the engine never reported ready (start-up stall)",
        r"Waiting for \d+ local, \d+ remote core engine proc\(s\) to start",
    ),
)
# Matched in the harness's own message only: an engine log mentions "Connection reset" in passing.
CONNECTION_LOST = _observed(
    "connection_lost",
    "host",
    "the connection to the machine was lost or never made",
    r"Connection (?:reset|closed|timed out|refused)|Broken pipe|No route to host|"
    r"kex_exchange_identification|client_loop: send disconnect|ssh: connect to host|"
    r"Could not resolve hostname|lost connection",
)
BLAMES = ("host", "harness", "model", "unknown")

_BY_NAME = {f.name: f for f in NAMED}
_OBSERVED_BY_NAME = {o.name: o for o in (*OBSERVED, *WRAPPERS, PROCESS_EXIT, CONNECTION_LOST)}


def family_blame(name: str) -> str:
    if name in _BY_NAME:
        return _BY_NAME[name].blame
    if name in _OBSERVED_BY_NAME:
        return _OBSERVED_BY_NAME[name].blame
    return "model" if name.startswith("refusal.") else "unknown"


def family_summary(name: str) -> str:
    if name in _BY_NAME:
        return _BY_NAME[name].summary
    if name in _OBSERVED_BY_NAME:
        return _OBSERVED_BY_NAME[name].summary
    if name.startswith("refusal."):
        return "a refusal of the engine (from its source)"
    if name == CAUSE_NOT_IN_LOG:
        return "only an error that points at an earlier one is in the log: its cause scrolled out or was cut"
    return "an error Apron does not classify"


def family_check(name: str) -> str | None:
    """What to look at for a failure of this family that no flag change fixes (None: nothing said)."""
    found = _BY_NAME.get(name) or _OBSERVED_BY_NAME.get(name)
    return (found.check or None) if found is not None else None


def is_wrapper(name: str) -> bool:
    return any(w.name == name for w in WRAPPERS)


def known_family_names() -> list[str]:
    return [f.name for f in NAMED] + [o.name for o in OBSERVED if o.name not in _BY_NAME]


# ------------------------------------------------------------------ typed fields


def typed_fields(family: str, raw: dict[str, str]) -> Fields:
    renames = dict(_BY_NAME[family].renames) if family in _BY_NAME else {}
    fields = {renames.get(k, k): coerce(v) for k, v in raw.items()}
    extra = _TEMPLATE_FIELDS.get(family)
    if extra is not None:
        fields = extra(fields)
    return fields


def _kv_fields(fields: Fields) -> Fields:
    """`estimated_msg` is "Based on the available memory, the estimated maximum model length is N. "
    or empty (no block fits at all)."""
    estimate = fields.pop("estimated_msg", None)
    m = re.search(r"estimated maximum model length is (\d+)", str(estimate or ""))
    fields["estimated_max_model_len"] = int(m.group(1)) if m else None
    return fields


def _max_len_fields(fields: Fields) -> Fields:
    """`msg`: "User-specified max_model_len (N) is greater than the derived max_model_len
    (key=D or model_max_length=M in model's config.json)."""
    msg = str(fields.pop("msg", ""))
    fields.pop("warning", None)
    m = re.search(
        r"max_model_len \((\d+)\) is greater than the derived max_model_len \((\w+)=([\d.]+|inf)"
        r"(?: or model_max_length=(\w+|[\d.]+))?",
        msg,
    )
    if m:
        fields["max_model_len"] = int(m.group(1))
        fields["derived_key"] = m.group(2)
        derived = float(m.group(3))
        fields["derived_max_model_len"] = int(derived) if math.isfinite(derived) else None
        fields["model_max_length"] = coerce(m.group(4)) if m.group(4) not in (None, "None") else None
    return fields


def _bf16_fields(fields: Fields) -> Fields:
    m = re.search(r"(\d+)\.(\d+)", str(fields.get("compute_str", "")))
    if m:
        fields["compute_capability"] = f"{m.group(1)}.{m.group(2)}"
    return fields


def _list_field(name: str) -> Callable[[Fields], Fields]:
    def parse(fields: Fields) -> Fields:
        value = fields.get(name)
        if isinstance(value, str):
            fields[name] = [v.strip(" '\"") for v in re.split(r"[,\s]+", value.strip("{}[]() ")) if v.strip(" '\"")]
        return fields

    return parse


def _arch_fields(fields: Fields) -> Fields:
    value = str(fields.get("architectures", fields.get("arch", "")))
    fields["architectures"] = re.findall(r"[A-Za-z_]\w*", value) if value else []
    fields.pop("arch", None)
    if "all_supported_archs" in fields:  # hundreds of names: count them, keep the output readable
        fields["num_supported_architectures"] = len(re.findall(r"'([^']+)'", str(fields.pop("all_supported_archs"))))
    return fields


_TEMPLATE_FIELDS: dict[str, Callable[[Fields], Fields]] = {
    "kv_cache_too_small": _kv_fields,
    "max_model_len_over_derived": _max_len_fields,
    "bfloat16_unsupported": _bf16_fields,
    "invalid_reasoning_parser": _list_field("valid_reasoning_parsers"),
    "architecture_unsupported": _arch_fields,
    "nccl_error": lambda fields: {**fields, "nccl_error": fields.get("error_str")},
}

_SIZE = r"([\d.]+)\s*([KMGT]i?B|bytes)"
_UNITS = {
    "B": 1,
    "bytes": 1,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
    "KB": 2**10,
    "MB": 2**20,
    "GB": 2**30,
    "TB": 2**40,
}


def _bytes(number: str, unit: str) -> int:
    return int(float(number) * _UNITS[unit])


def _oom_fields(text: str) -> Fields:
    """PyTorch's allocator message (c10/cuda/CUDACachingAllocator.cpp): "Tried to allocate 2.00 GiB.
    GPU 0 has a total capacity of 23.55 GiB of which 1.06 GiB is free. ... Of the allocated memory
    20.08 GiB is allocated by PyTorch, and 1.19 GiB is reserved by PyTorch but unallocated."""
    fields: Fields = {}
    for name, regex in (
        ("tried_bytes", r"Tried to allocate " + _SIZE),
        ("total_capacity_bytes", r"total capacity of " + _SIZE),
        ("free_bytes", r"of which " + _SIZE + r" is free"),
        ("allocated_by_pytorch_bytes", _SIZE + r" is allocated by PyTorch"),
        ("reserved_unallocated_bytes", _SIZE + r" is reserved by PyTorch but unallocated"),
    ):
        m = re.search(regex, text)
        if m:
            fields[name] = _bytes(m.group(1), m.group(2))
    m = re.search(r"\bGPU (\d+)\b", text)
    if m:
        fields["gpu_index"] = int(m.group(1))
    return fields


def _nccl_fields(text: str) -> Fields:
    m = re.search(
        r"(unhandled (?:cuda|system) error|internal error|invalid usage|remote process exited[^,.]*"
        r"|invalid argument|operation not supported)",
        text,
        re.I,
    )
    return {"nccl_error": m.group(1)} if m else {}


_OBSERVED_FIELDS = {"cuda_oom": _oom_fields, "nccl_error": _nccl_fields}
