"""JSONStreamConnector (the seed's module path `rills.connectors.json_stream`); see rills._io_connectors."""

from .._io_connectors import JSONStreamConnector

__all__ = ["JSONStreamConnector"]
