"""Seed 001's message queues: FIFO / priority queues, SQLite persistence, a manager."""

from .message_queue import MessageQueue, QueueFullError
from .queue_manager import QueueManager
from .queue_store import QueueStore

__all__ = ["MessageQueue", "QueueFullError", "QueueManager", "QueueStore"]
