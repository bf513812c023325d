"""When a boot breaks: fingerprint the failure (the rest of the diagnosis lands next)."""
from __future__ import annotations

from apron.rules.fingerprint import Fingerprint, fingerprint

__all__ = ["Fingerprint", "fingerprint"]
