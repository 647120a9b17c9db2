"""Seed 001's message queues: FIFO / priority queues, SQLite persistence, a manager."""

from .message_queue import MessageQueue, QueueFullError
from .queue_manager import QueueManager
from .queue_store import QueueStore

__all__ = ["MessageQueue", "QueueFullError", "QueueManager", "QueueStore"]

from .table_bridge import QueueBridge, feed_queue_from_table, feed_table_from_queue  # noqa: E402

__all__ += ["QueueBridge", "feed_queue_from_table", "feed_table_from_queue"]
