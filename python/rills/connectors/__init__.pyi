"""Input connectors."""

from .base import BaseConnector as BaseConnector
from .memory import MemoryConnector as MemoryConnector

__all__: list[str]
