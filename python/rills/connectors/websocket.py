"""WebSocketConnector (the seed's module path `rills.connectors.websocket`); see rills._io_connectors."""

from .._io_connectors import WebSocketConnector

__all__ = ["WebSocketConnector"]
