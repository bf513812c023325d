"""Checkpoint inputs: config files and safetensors headers, from a folder, the Hub or a snapshot."""

from apron.checkpoint.model import Checkpoint
from apron.checkpoint.resolve import load_checkpoint

__all__ = ["Checkpoint", "load_checkpoint"]
