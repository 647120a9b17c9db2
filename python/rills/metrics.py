"""MetricsRegistry: engine counters and user-defined business metrics."""

from __future__ import annotations

import numbers
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional

if TYPE_CHECKING:
    from .engine import RillEngine

__all__ = ["MetricsRegistry"]

Evaluator = Callable[["RillEngine"], Any]


def _as_float(value: Any) -> Optional[float]:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if hasattr(value, "as_py"):  # a pyarrow scalar
        return _as_float(value.as_py())
    return None


class MetricsRegistry:
    """Business metrics evaluated on every tick, plus the engine's counters.

    An evaluator is called as `evaluator(engine)` on the engine's loop thread;
    its latest return value (any Python object) is kept in `business_metrics`,
    and numeric values also reach the engine's metrics in C++. An evaluator
    that raises is logged and recorded as an engine event; its entry then
    holds "Error evaluating metric: <message>".
    """

    def __init__(self, engine: Optional["RillEngine"] = None):
        self._engine_ref = weakref.ref(engine) if engine is not None else None
        self._lock = threading.Lock()
        self._evaluators: Dict[str, Evaluator] = {}
        self._values: Dict[str, Any] = {}

    def _engine(self) -> Optional["RillEngine"]:
        return self._engine_ref() if self._engine_ref is not None else None

    def register_metric(self, name: str, evaluator: Evaluator) -> None:
        """Evaluate `evaluator(engine)` on every tick under `name` (replacing an earlier one)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a business metric needs a non-empty name, got {name!r}")
        if not callable(evaluator):
            raise TypeError(f"evaluator must be callable, got {type(evaluator).__name__}")
        with self._lock:
            replaced = name in self._evaluators
            self._evaluators[name] = evaluator
        engine = self._engine()
        if engine is not None:
            if replaced:
                engine._core.unregister_business_metric(name)
            engine._core.register_business_metric(name, _thunk(weakref.ref(self), engine._self_ref, name, evaluator))

    def unregister_metric(self, name: str) -> None:
        """Stop evaluating `name`. Unknown names are ignored."""
        with self._lock:
            known = self._evaluators.pop(name, None) is not None
            self._values.pop(name, None)
        engine = self._engine()
        if known and engine is not None:
            engine._core.unregister_business_metric(name)

    @property
    def business_metrics(self) -> Dict[str, Any]:
        """Latest value of every business metric, by name."""
        with self._lock:
            return dict(self._values)

    def _store(self, name: str, value: Any) -> None:
        with self._lock:
            if name in self._evaluators:
                self._values[name] = value

    def evaluate_business_metrics(self, engine: Optional["RillEngine"] = None) -> Dict[str, Any]:
        """Evaluate every metric now (in the calling thread) and return the values."""
        engine = engine if engine is not None else self._engine()
        with self._lock:
            evaluators = dict(self._evaluators)
        for name, evaluator in evaluators.items():
            try:
                self._store(name, evaluator(engine))
            except Exception as exc:  # reported like the tick does, without raising
                self._store(name, f"Error evaluating metric: {exc}")
        return self.business_metrics

    def get_system_metrics(self, engine: Optional["RillEngine"] = None) -> Dict[str, Any]:
        """Return the engine's counters (see RillEngine.get_metrics), without business metrics."""
        engine = engine if engine is not None else self._engine()
        if engine is None:
            return {}
        metrics = engine._system_metrics()
        return metrics

    def get_all_metrics(self, engine: Optional["RillEngine"] = None) -> Dict[str, Any]:
        """Return the engine's counters plus "business_metrics"."""
        metrics = self.get_system_metrics(engine)
        metrics["business_metrics"] = self.business_metrics
        return metrics

    def __repr__(self) -> str:
        return f"<MetricsRegistry(metrics={sorted(self._evaluators)!r})>"


def _thunk(registry_ref, engine_ref, name: str, evaluator: Evaluator) -> Callable[[], Optional[float]]:
    # Weak references only: the engine's C++ side holds this function.
    def run() -> Optional[float]:
        registry = registry_ref()
        try:
            value = evaluator(engine_ref())
        except Exception as exc:
            if registry is not None:
                registry._store(name, f"Error evaluating metric: {exc}")
            raise
        if registry is not None:
            registry._store(name, value)
        return _as_float(value)

    return run
