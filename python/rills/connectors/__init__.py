"""Input connectors: BaseConnector (subclass it in Python) and the built-in ones.

    from rills.connectors import BaseConnector, MemoryConnector

Modules: base (BaseConnector), memory (MemoryConnector), json_stream
(JSONStreamConnector), file (FileStreamConnector), kafka (KafkaConnector), postgres_cdc (PostgresCDCConnector), websocket (WebSocketConnector).
"""

from .base import BaseConnector
from .memory import MemoryConnector
from .file import FileStreamConnector  # noqa: E402  (needs base and memory first)
from .json_stream import JSONStreamConnector
from .kafka import KafkaConnector
from .postgres_cdc import PostgresCDCConnector
from .websocket import WebSocketConnector

__all__ = ["BaseConnector", "MemoryConnector", "JSONStreamConnector", "FileStreamConnector",
           "KafkaConnector", "PostgresCDCConnector", "WebSocketConnector"]
