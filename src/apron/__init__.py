"""Apron: will this LLM fit, boot and answer on this GPU with this vLLM release - and with which flags?"""

__version__ = "0.1.0"
