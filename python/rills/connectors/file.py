"""FileStreamConnector (the seed's module path `rills.connectors.file`); see rills._io_connectors."""

from .._io_connectors import FileStreamConnector

__all__ = ["FileStreamConnector"]
