"""Runs inside the vLLM CPU build: construct a model on the meta device and read its KV specs.

The real vLLM code path of a CUDA boot, as far as a CPU machine can take it: vLLM builds the model
class from the checkpoint's config.json (random weights are never allocated: every tensor lives on
the meta device), the runner's get_kv_cache_spec collects each attention layer's own spec,
Platform.update_block_size_for_backend picks the block size from the layers' own backends,
resolve_kv_cache_layout picks the KV cache layout, and the caller runs vLLM's grouping on those.

What the CPU build cannot do for a CUDA model is replaced by stand-ins, each at a boundary that does
not decide a cache layout (listed in STAND_INS, printed with the conformance table):
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import json
import os
import socket
import sys
import tempfile
import types
import typing
from pathlib import Path

STAND_INS = (
    "torchvision: an empty module (only image processors import it; the CPU venv has none)",
    "model-class inspection runs in-process (vLLM runs it in a subprocess only to keep CUDA out of the parent)",
    "torch.cuda Stream/Event/get_device_properties and torch.accelerator device queries: inert objects",
    "the GPU's compute capability: the plan's GPU (current_platform.get_device_capability)",
    "platform config hook: none (CUDA's only names the worker class; the CPU platform's forces 128-token blocks and fp32 states)",
    "0.30, 0.31: CUDA's kpool-indexer block alignment (platforms/cuda.py _get_indexer_block_alignment) on the base platform",
    "attention backend selection: the backend the plan names (platforms/cuda.py cannot import without CUDA)",
    "tensor-parallel world size: the plan's TP (get_tensor_model_parallel_world_size; rank 0)",
    "MoE experts, FP8 GEMM kernels, TileLang and Triton JIT helpers, the workspace manager: not built (weights and kernels only)",
    "pinned-host and UVA n-gram tables: allocated on the meta device",
    "DeepSeek-V4.1's Engram token map: built from the config's compressed vocab size (needs the tokenizer otherwise)",
    "0.30, 0.31: the EngramConfig of a model with n-gram tables made as on CUDA (config/vllm.py makes it on CUDA only)",
    "kernel builds: FlashMLA's mega-attention, FlashKDA and FlashAttention 3/4 (fp8 KV on SM90/SM100) count as present",
    "FLASHINFER (no flashinfer package on the CPU build): full-attention layers on SM100 built with FLASH_ATTN "
    "(MiniMax-M3's: the same FullAttentionSpec; 0.29/0.30's block size from layer 0: 16 for both)",
)


class _Inert:
    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: None


class _Anything:
    """What an attribute of the empty torchvision module is: any attribute, call, subclass or
    `X | Y` annotation works and does nothing."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()

    def __call__(self, *args, **kwargs):
        return _Anything()

    def __or__(self, other):
        return typing.Any

    __ror__ = __or__

    def __mro_entries__(self, bases):
        return (object,)


class _AnyModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()


class _TorchvisionFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _AnyModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def install_stand_ins(capability: tuple[int, int]) -> None:
    """Once per process, before any model module is imported."""
    if _CAPABILITY:
        return
    os.environ.setdefault("VLLM_CACHE_ROOT", tempfile.mkdtemp(prefix="apron-vllm-cache-"))
    import torch
    import transformers.image_processing_utils  # noqa: F401  (decides torchvision is absent first)
    import vllm.config  # noqa: F401

    sys.meta_path.insert(0, _TorchvisionFinder())
    torch.cuda.Stream = _Inert
    torch.cuda.Event = _Inert
    # The case's capability at each call (one process builds cases for several GPUs).
    torch.cuda.get_device_properties = lambda *a, **k: types.SimpleNamespace(
        multi_processor_count=132,
        total_memory=80 * 2**30,
        major=_CAPABILITY[0].major if _CAPABILITY else capability[0],
        minor=_CAPABILITY[0].minor if _CAPABILITY else capability[1],
        name="stand-in",
    )
    torch.accelerator.empty_cache = lambda: None
    torch.accelerator.current_device_index = lambda: 0
    empty = torch.empty
    # torch.device("meta") routes the constructors it listed on first use (an lru_cache of torch.empty
    # and its kin): list them before torch.empty is wrapped, or every tensor lands on the CPU.
    from torch.utils._device import _device_constructors

    _device_constructors()

    def empty_without_pinning(*args, pin_memory=False, **kwargs):
        if pin_memory:
            kwargs["device"] = "meta"
        return empty(*args, **kwargs)

    torch.empty = empty_without_pinning
    import vllm.tilelang_utils as tilelang_utils

    tilelang_utils.has_tilelang = lambda: True
    tilelang_utils.tilelang = _Inert()
    tilelang_utils.T = _Inert()
    tilelang_utils.tilelang_jit = lambda *a, **k: a[0] if a and callable(a[0]) and not k else (lambda f: f)
    import vllm.triton_utils as triton_utils

    if not hasattr(triton_utils.triton, "next_power_of_2"):
        triton_utils.triton.next_power_of_2 = lambda n: 1 << (int(n) - 1).bit_length()
        triton_utils.triton.cdiv = lambda a, b: -(-a // b)
    import vllm.utils.torch_utils as torch_utils

    torch_utils.get_accelerator_view_from_cpu_tensor = lambda t, *a, **k: t
    from vllm.v1.worker import workspace

    workspace.init_workspace_manager(torch.device("meta"))
    import torch.nn as nn
    from vllm.model_executor.layers.fused_moe import routed_experts

    routed_experts.RoutedExperts.__init__ = lambda self, *a, **k: nn.Module.__init__(self)
    import vllm.model_executor.kernels.linear as linear_kernels
    import vllm.model_executor.layers.quantization.fp8 as fp8

    linear_kernels.init_fp8_linear_kernel = lambda *a, **k: _Inert()
    fp8.init_fp8_linear_kernel = linear_kernels.init_fp8_linear_kernel
    try:
        import vllm.models.deepseek_v41.nvidia.flash_mla_mega_attn as mega

        mega.is_flashmla_mega_attn_supported = lambda: (_CAPABILITY[0].major == 10, None)
        mega.permute_on_load = lambda *a, **k: None  # weight re-ordering at load time
        from vllm.model_executor.layers.linear import LinearBase

        construct = mega.DeepseekV4MegaAttnAttention.__init__

        def construct_without_fp8_scales(self, *args, **kwargs):
            LinearBase.weight_scale = None  # the FP8 scales the stubbed kernels did not create
            try:
                construct(self, *args, **kwargs)
            finally:
                del LinearBase.weight_scale

        mega.DeepseekV4MegaAttnAttention.__init__ = construct_without_fp8_scales
    except ImportError:
        pass
    _cuda_kernels_present()
    from vllm.model_executor.models import registry

    registry._run_in_subprocess = lambda fn: fn()
    from vllm.platforms import current_platform

    platform = type(current_platform)
    platform.get_device_capability = classmethod(lambda cls, device_id=0: _CAPABILITY[0])
    platform.get_attn_backend_cls = classmethod(lambda cls, *a, **k: _chosen_backend(*a, **k))
    platform.check_and_update_config = classmethod(lambda cls, vllm_config: None)
    from vllm.platforms.interface import Platform

    if hasattr(Platform, "_get_indexer_block_alignment"):  # 0.30, 0.31
        Platform._get_indexer_block_alignment = classmethod(lambda cls, vc: _cuda_indexer_block_alignment(vc))
    import vllm.model_executor.layers.fused_moe.layer as moe_layer

    real_factory = moe_layer.FusedMoEFactory

    def experts_or_placeholder(*args, **kwargs):
        try:
            return real_factory(*args, **kwargs)
        except NotImplementedError:  # MoE configurations only CUDA builds take (is_act_and_mul=False)
            return nn.Module()

    moe_layer.FusedMoEFactory = experts_or_placeholder
    _set_capability(capability)


_CAPABILITY: list = []


class _CudaPlatformView:
    """The current platform as a CUDA build would answer is_cuda(); everything else delegates."""

    def __init__(self, platform):
        self._platform = platform

    def is_cuda(self):
        return True

    def __getattr__(self, name):
        return getattr(self._platform, name)


def _cuda_indexer_block_alignment(vllm_config) -> int | None:
    """platforms/cuda.py _get_indexer_block_alignment (0.30, 0.31), which the base Platform leaves at
    None: a kpool indexer's block is a multiple of index_kpool x the smallest DeepGEMM paged-MQA page
    (the largest on SM120)."""
    kpool = getattr(vllm_config.model_config.hf_text_config, "index_kpool", None)
    if not kpool or kpool <= 1:
        return None
    from vllm.utils.deep_gemm import PAGED_MQA_PAGE_SIZES

    pages = PAGED_MQA_PAGE_SIZES
    return kpool * (max(pages) if _CAPABILITY[0].major == 12 else min(pages))


def _cuda_kernels_present() -> None:
    """FlashKDA: its availability check asks is_cuda(); its workspace query needs the op."""
    import torch

    sys.modules.setdefault("vllm._flashkda_C", types.ModuleType("vllm._flashkda_C"))
    torch.ops._flashkda_C = types.SimpleNamespace(get_workspace_size=lambda *a, **k: 0)
    try:
        import vllm.models.glm5next.common.kda as kda
    except ImportError:
        return
    kda.current_platform = _CudaPlatformView(kda.current_platform)


def _set_capability(capability) -> None:
    from vllm.platforms.interface import DeviceCapability

    _CAPABILITY[:] = [DeviceCapability(*capability)]


_DEFAULT_BACKENDS = {"dense": "FLASH_ATTN", "mla": "FLASH_ATTN_MLA", "sparse": "FLASHMLA_SPARSE"}
_BACKENDS = dict(_DEFAULT_BACKENDS)


def use_case_backends(case: dict) -> None:
    """The case's backends over the defaults: a process builds many cases, and one case's choice must
    not carry into the next. v1/attention/selector.py (0.30.0:200, 0.32.0:203) caches each choice by
    the layer's shape, not by our backends: cleared too, or the next case gets the last one's."""
    try:
        from vllm.v1.attention import selector
    except ImportError:  # where a release keeps it outside v1
        from vllm.attention import selector  # type: ignore[no-redef]

    _BACKENDS.clear()
    _BACKENDS.update(_DEFAULT_BACKENDS)
    _BACKENDS.update(case.get("backends") or {})
    for value in vars(selector).values():
        if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", "") == selector.__name__:
            value.cache_clear()


def _chosen_backend(selected_backend, attn_selector_config, num_heads=None):
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    if selected_backend is not None:
        return selected_backend.get_path()
    if getattr(attn_selector_config, "use_sparse", False):
        name = _BACKENDS["sparse"]
    else:
        name = _BACKENDS["mla"] if attn_selector_config.use_mla else _BACKENDS["dense"]
    return AttentionBackendEnum[name].get_path()


def _patch_module_functions(tp: int) -> None:
    """Functions modules imported by name before the case's values were known."""
    import vllm.utils.torch_utils as torch_utils

    # the FlashAttention backend's fp8 probe is patched below: import it now, whichever case comes first
    importlib.import_module("vllm.v1.attention.backends.flash_attn")

    for name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None)
        if not name.startswith("vllm") or namespace is None:
            continue
        if "get_tensor_model_parallel_world_size" in namespace:
            module.get_tensor_model_parallel_world_size = lambda: tp
        if "get_accelerator_view_from_cpu_tensor" in namespace and module is not torch_utils:
            module.get_accelerator_view_from_cpu_tensor = torch_utils.get_accelerator_view_from_cpu_tensor
        if "FusedMoEFactory" in namespace and name != "vllm.model_executor.layers.fused_moe.layer":
            module.FusedMoEFactory = sys.modules["vllm.model_executor.layers.fused_moe.layer"].FusedMoEFactory
        if name == "vllm.v1.attention.backends.flash_attn" and "flash_attn_supports_kv_cache_dtype" in namespace:
            # FlashAttention 3/4 on Hopper/Blackwell takes fp8 KV; the CPU wheel has no FA kernels.
            module.flash_attn_supports_kv_cache_dtype = lambda kv_cache_dtype="fp8_e4m3", **kw: (
                kv_cache_dtype != "fp8_e5m2" and _CAPABILITY[0].major in (9, 10)
            )
        if name.startswith("vllm.models") and "is_flash_attn_varlen_func_available" in namespace:
            module.is_flash_attn_varlen_func_available = lambda: True


_DISTRIBUTED = []


def _init_distributed(vllm_config) -> None:
    """One gloo process group for the process; model-parallel groups per case (the expert-parallel
    group exists only when the case's model is a MoE)."""
    from vllm.config import set_current_vllm_config
    from vllm.distributed import parallel_state

    with set_current_vllm_config(vllm_config):
        if not _DISTRIBUTED:
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            sock.close()
            parallel_state.init_distributed_environment(
                world_size=1, rank=0, distributed_init_method=f"tcp://127.0.0.1:{port}", local_rank=0, backend="gloo"
            )
            _DISTRIBUTED.append(True)
        else:
            parallel_state.destroy_model_parallel()
        parallel_state.initialize_model_parallel(1, 1)


def _engram_token_map(hf_text_config) -> None:
    module = sys.modules.get("vllm.models.deepseek_v41.common.engram")
    if module is None or getattr(hf_text_config, "engram_compressed_vocab_size", None) is None:
        return
    import transformers

    transformers.AutoTokenizer.from_pretrained = lambda *a, **k: None
    pad, vocab = int(hf_text_config.engram_pad_token_id), int(hf_text_config.engram_compressed_vocab_size)
    module.build_compressed_token_map = lambda tokenizer: ([0] * (pad + 1), vocab)


def vllm_config_for(case: dict, folder: Path):
    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig

    model_config = ModelConfig(
        model=str(folder),
        skip_tokenizer_init=True,
        max_model_len=case["max_model_len"],
        dtype=case.get("dtype", "auto"),
        language_model_only=case.get("language_model_only", False),
    )
    # engine/arg_utils.py _set_default_chunked_prefill_and_prefix_caching_args: prefix caching on
    # unless the model cannot use it (attention-free); the model's config hook then picks the
    # Mamba cache mode from it.
    cache_config = CacheConfig(
        cache_dtype=case.get("kv_cache_dtype", "auto"),
        enable_prefix_caching=model_config.is_prefix_caching_supported,
    )
    # engine/arg_utils.py create_engine_config: the engine-wide window, for models that slide everywhere.
    layer_types = getattr(model_config.hf_text_config, "layer_types", None)
    if layer_types is None or all(kind == "sliding_attention" for kind in layer_types):
        cache_config.sliding_window = model_config.get_sliding_window()
    scheduler = SchedulerConfig(
        max_model_len=case["max_model_len"],
        max_num_batched_tokens=case["max_num_batched_tokens"],
        max_num_seqs=min(case.get("max_num_seqs", 256), case["max_num_batched_tokens"]),
        is_encoder_decoder=False,
    )
    vc = VllmConfig(model_config=model_config, cache_config=cache_config, scheduler_config=scheduler)
    _engram_config_as_on_cuda(vc)
    return vc


def _engram_config_as_on_cuda(vc) -> None:
    """config/vllm.py _resolve_and_verify_engram_config (0.30, 0.31) creates the EngramConfig of a
    model with n-gram tables only on CUDA(-alike) platforms; 0.32 on every platform."""
    try:
        from vllm.config.engram import EngramConfig, model_has_engram_layers
    except ImportError:  # 0.29: no n-gram table configuration
        return
    if vc.engram_config is None and model_has_engram_layers(vc.model_config):
        vc.engram_config = EngramConfig()  # (its verify_model_config asks is_cuda(): not called)


def build(case: dict) -> dict:
    """Construct the case's model and return what the engine would plan with."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.models import ModelRegistry

    use_case_backends(case)
    _set_capability(tuple(case.get("capability", (9, 0))))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "config.json").write_text(json.dumps(case["config"]))
        vc = vllm_config_for(case, folder)
        _init_distributed(vc)
        # One process stands for rank 0 of the plan's TP group (see _patch_module_functions).
        vc.parallel_config.tensor_parallel_size = case["tp"]
        mc = vc.model_config
        if case.get("model_class"):
            module_name, class_name = case["model_class"].rsplit(".", 1)
            cls = getattr(importlib.import_module(module_name), class_name)
        else:
            cls, _ = ModelRegistry.resolve_model_cls(mc.architectures, mc)
        _patch_module_functions(case["tp"])
        from vllm.distributed import parallel_state

        parallel_state.get_tp_group().world_size = case["tp"]
        _engram_token_map(mc.hf_text_config)
        with set_current_vllm_config(vc), torch.device("meta"):
            cls(vllm_config=vc, prefix="")
        return _engine_view(vc)


def _engine_view(vc) -> dict:
    from vllm.config import set_current_vllm_config
    from vllm.config.vllm import get_layers_from_vllm_config
    from vllm.distributed.kv_transfer.kv_connector.utils import get_current_attn_backends
    from vllm.model_executor.layers.attention import Attention
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.platforms.interface import Platform
    from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout
    from vllm.v1.kv_cache_interface import AttentionSpec

    try:  # 0.32+: v1/worker/utils.py customize_attention_spec (the backend's spec, kernel-block stride)
        from vllm.v1.worker.utils import customize_attention_spec
    except ImportError:  # 0.29-0.31: gpu_model_runner.py get_kv_cache_spec calls customize_spec alone

        def customize_attention_spec(backend, spec):
            return backend.customize_spec(spec)

    with set_current_vllm_config(vc):
        Platform.update_block_size_for_backend.__func__(Platform, vc)
        specs, layer_backends = {}, {}
        # v1/worker/gpu_model_runner.py get_kv_cache_spec
        for name, module in get_layers_from_vllm_config(vc, AttentionLayerBase).items():
            if isinstance(module, Attention) and module.kv_sharing_target_layer_name:
                continue
            if spec := module.get_kv_cache_spec(vc):
                if isinstance(spec, AttentionSpec):
                    spec = customize_attention_spec(module.get_attn_backend(), spec)
                specs[name] = spec
                layer_backends[name] = module.get_attn_backend()
        backends = get_current_attn_backends(vc)
        layouts = [layout.name for layout in get_supported_kv_cache_layouts(backends)]
        layout = resolve_kv_cache_layout(vc, [layouts], specs.values())
    return {
        "vllm_config": vc,
        "specs": specs,
        "block_size": vc.cache_config.block_size,
        "mamba_page_size_padded": vc.cache_config.mamba_page_size_padded,
        "layout": layout.name,
        "backends": sorted({b.get_name() for b in backends}),
        "layer_backends": layer_backends,
    }


def kernel_block_sizes(config, specs: dict, layer_backends: dict) -> list[int]:
    """v1/worker/utils.py prepare_kernel_block_sizes, as the runner calls it when it allocates the
    cache: each group's kernel block common to its layers' backends, or the engine's ValueError.
    The runner's attention groups are one per (backend, spec) within a KV cache group."""
    from vllm.v1.worker.utils import prepare_kernel_block_sizes

    groups = []
    for group in config.kv_cache_groups:
        seen: dict = {}
        for name in group.layer_names:
            backend = layer_backends[name]
            seen.setdefault((backend, specs[name]), []).append(name)
        groups.append([types.SimpleNamespace(backend=b, kv_cache_spec=s, layer_names=n) for (b, s), n in seen.items()])
    return prepare_kernel_block_sizes(config, groups)


def spec_wire(spec, vc) -> dict:
    """A plain form of one layer's spec, with the two numbers the planner reads."""
    import torch

    out = {"class": type(spec).__name__, "block_size": spec.block_size, "page_size_bytes": spec.page_size_bytes}
    out["max_memory_usage_bytes"] = spec.max_memory_usage_bytes(vc)
    for field in (
        "num_kv_heads",
        "head_size",
        "head_size_v",
        "sliding_window",
        "tokens_per_state",
        "state_content_bytes",
        "alignment",
        "page_size_padded",
        "extra_retained_tokens",
        "bounded_replay",
        "tp_replicated",
        "num_prefill_checkpoint_blocks",
        "num_speculative_blocks",
        "cache_dtype_str",
    ):
        value = getattr(spec, field, None)
        if value is not None and not callable(value):
            out[field] = value if isinstance(value, (int, str, bool)) else int(value)
    if hasattr(spec, "dtype"):
        out["dtype_bytes"] = torch.tensor([], dtype=spec.dtype).element_size()
    if hasattr(spec, "shapes"):
        out["shapes"] = [list(s) for s in spec.shapes]
        out["dtype_bytes"] = [torch.tensor([], dtype=d).element_size() for d in spec.dtypes]
    if hasattr(spec, "get_block_stride_alignment"):  # 0.31+
        out["block_stride_alignment"] = spec.get_block_stride_alignment()
    return out
