"""The engine functions whose logic the planner (or this extractor) re-implements.

Each is found by qualified name anywhere in the package (functions move between files across
releases) and its source segment hashed; a changed hash means "plans that depend on it need
re-checking", never a silently trusted number. Patterns are fnmatch globs over the qualified name
and, optionally, the file path relative to `vllm/`.
"""

from __future__ import annotations

MIRRORED_PATTERNS: list[tuple[str, str | None]] = [
    # memory accounting at start-up
    ("Worker.determine_available_memory", "v1/worker/gpu_worker.py"),
    ("memory_profiling", None),
    ("request_memory", None),
    # KV cache grouping, block counts and the capacity log line
    ("get_kv_cache_configs", None),
    ("get_kv_cache_groups", None),
    ("_get_kv_cache_groups_*", None),
    ("_get_packed_kv_cache_groups", None),
    ("is_kv_cache_spec_uniform", None),
    ("get_uniform_page_size", None),
    ("unify_kv_cache_spec_page_size", None),
    ("get_kv_cache_config_from_groups", None),
    ("get_max_concurrency_for_kv_cache_config", None),
    ("_check_enough_kv_cache_memory", None),
    ("get_kv_cache_capacity", None),
    ("update_kv_cache_capacity", None),
    ("*.page_size_bytes", "v1/kv_cache_interface.py"),
    ("*.real_page_size_bytes", "v1/kv_cache_interface.py"),
    ("*.max_memory_usage_bytes", "v1/kv_cache_interface.py"),
    ("MambaStateShapeCalculator.*", None),
    ("MambaStateDtypeCalculator.*", None),
    # block size alignment
    ("Platform._align_hybrid_block_size", "platforms/interface.py"),
    ("Platform.update_block_size_for_backend", "platforms/interface.py"),
    ("Platform.is_device_capability_family", "platforms/interface.py"),
    # batch defaults and CUDA graphs
    ("EngineArgs.get_batch_defaults", None),
    ("EngineArgs._set_default_max_num_seqs_and_batched_tokens_args", None),
    ("VllmConfig._set_cudagraph_sizes", None),
    ("CompilationConfig.resolve_cudagraph_mode_and_sizes", None),
    # weights
    ("mxfp4_round_up_hidden_size_and_intermediate_size", None),
    ("pad_vocab_size", None),
    ("VocabParallelEmbedding.__init__", None),
    # what this extractor itself mirrors to read registries and render refusals
    ("_resolve_module_name", "model_executor/models/registry.py"),
    ("_ModelRegistry.get_supported_archs", None),
    ("_ModelRegistry._raise_for_unsupported", None),
    ("VllmConfig._get_quantization_config", None),
    ("_get_backend_priorities", "platforms/cuda.py"),
]
