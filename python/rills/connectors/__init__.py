"""Input connectors: BaseConnector (subclass it in Python) and the built-in ones.

    from rills.connectors import BaseConnector, MemoryConnector

Modules: base (BaseConnector), memory (MemoryConnector).
"""

from .base import BaseConnector
from .memory import MemoryConnector

__all__ = ["BaseConnector", "MemoryConnector"]
