"""AnalyticsEngine: queues, processors, windows, pipelines and metrics in one place.

    engine = AnalyticsEngine()
    q = engine.queues.create_queue("events")
    engine.add_processor(StreamProcessor("double").map(lambda e: {**e, "value": e["value"] * 2}))
    engine.add_window("per10s", TumblingWindow(10))
    engine.add_pipeline(AggregationPipeline("by_user").group_by("user_id").aggregate("sum", "value"))
    q.enqueue({"user_id": 1, "value": 5, "timestamp": 0})
    engine.run_once()          # drain queues -> processors -> windows, pipelines, metrics
    engine.get_dashboard()
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional

from ..aggregation.aggregation_pipeline import AggregationPipeline
from ..queue.queue_manager import QueueManager
from ..stream.stream_processor import StreamProcessor
from .stream_analytics import StreamAnalytics

__all__ = ["AnalyticsEngine"]


class AnalyticsEngine:
    """Drains its queues through processors into windows, pipelines and metrics."""

    def __init__(self, queue_store: Optional[Any] = None, metrics_db: Optional[str] = None):
        self.queues = QueueManager(queue_store)
        self.analytics = StreamAnalytics(db_path=metrics_db)
        self.processors: List[StreamProcessor] = []
        self.windows: Dict[str, Any] = {}
        self.pipelines: Dict[str, AggregationPipeline] = {}
        self.pipeline_results: Dict[str, Dict[Any, Dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def add_processor(self, processor: StreamProcessor) -> None:
        self.processors.append(processor)

    def add_window(self, name: str, window: Any) -> None:
        self.windows[name] = window

    def add_pipeline(self, pipeline: AggregationPipeline) -> None:
        self.pipelines[pipeline.name] = pipeline

    def process_events(self, events: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Run events through every processor in order, then windows, pipelines and metrics."""
        with self._lock:
            for p in self.processors:
                events = p.process_batch(events)
            for w in self.windows.values():
                for e in events:
                    w.add_event(e)
            for name, p in self.pipelines.items():
                self.pipeline_results[name] = p.process_incremental(events)
            self.analytics.track_metric("events_processed", len(events))
            for e in events:
                for k, v in e.items():
                    if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "timestamp":
                        self.analytics.track_metric(k, v)
            return events

    def run_once(self, max_messages: int = 10000) -> int:
        """Drain up to max_messages from every queue; return the events processed."""
        total = 0
        for name in self.queues.list_queues():
            queue = self.queues.get_queue(name)
            if queue is None:
                continue
            batch = queue.dequeue_batch(max_messages)
            if batch:
                total += len(self.process_events(batch))
        return total

    def get_dashboard(self) -> Dict[str, Any]:
        return {
            "queues": self.queues.get_all_stats(),
            "processors": [p.get_stats() for p in self.processors],
            "windows": {n: w.get_stats() for n, w in self.windows.items()},
            "pipelines": self.pipeline_results,
            "metrics": self.analytics.get_all_metrics(),
        }
