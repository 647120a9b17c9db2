"""MetricsRegistry: engine counters and business metrics."""

from typing import Any, Callable, Dict, Optional

import pyarrow as pa

from .engine import RillEngine

Evaluator = Callable[[RillEngine], Any]

class MetricsRegistry:
    """Business metrics evaluated every tick (evaluator(engine)), plus the engine's counters."""

    def __init__(self, engine: Optional[RillEngine] = None) -> None: ...
    def register_metric(self, name: str, evaluator: Evaluator) -> None:
        """Evaluate evaluator(engine) on every tick."""
    def unregister_metric(self, name: str) -> None:
        """Stop evaluating a metric."""
    @property
    def business_metrics(self) -> Dict[str, Any]:
        """Latest value of each business metric."""
    def evaluate_business_metrics(self, engine: Optional[RillEngine] = None) -> Dict[str, Any]:
        """Evaluate every metric now."""
    def get_system_metrics(self, engine: Optional[RillEngine] = None) -> Dict[str, Any]:
        """The engine's counters."""
    def get_all_metrics(self, engine: Optional[RillEngine] = None) -> Dict[str, Any]:
        """Counters plus "business_metrics"."""
    def record_step(self, records_in_batch: int, latency_ms: float) -> None:
        """Count one completed micro-batch (added to the engine's counters)."""
    def get_metrics_arrow_table(self, engine: Optional[RillEngine] = None) -> pa.Table:
        """One row of the current figures, with the seed's columns."""
