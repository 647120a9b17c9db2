"""KafkaConnector (the seed's module path `rills.connectors.kafka`); see rills._io_connectors."""

from .._io_connectors import KafkaConnector, KafkaMockCluster

__all__ = ["KafkaConnector", "KafkaMockCluster"]
