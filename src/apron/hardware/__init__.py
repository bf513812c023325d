"""GPU catalog: total bytes as PyTorch sees them, compute capability, and the names people use."""

from apron.hardware.gpus import Gpu, all_gpus, resolve_gpu

__all__ = ["Gpu", "all_gpus", "resolve_gpu"]
