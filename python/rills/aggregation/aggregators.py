"""Aggregators: objects with init() / add(state, value) / merge(a, b) / result(state).

A custom aggregator is any object with those four methods (subclassing
Aggregator is optional). Values that are None are skipped by every built-in
aggregator except count('*').
"""

from __future__ import annotations

from typing import Any

__all__ = ["Aggregator", "CountAggregator", "SumAggregator", "AvgAggregator", "MinAggregator",
           "MaxAggregator", "CountDistinctAggregator", "make_aggregator"]


class Aggregator:
    """Base class of aggregators; `name` names the output."""

    name = "aggregate"

    def init(self) -> Any:
        raise NotImplementedError

    def add(self, state: Any, value: Any) -> Any:
        raise NotImplementedError

    def merge(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def result(self, state: Any) -> Any:
        return state


class CountAggregator(Aggregator):
    name = "count"

    def __init__(self, star: bool = True):
        self.star = star

    def init(self):
        return 0

    def add(self, state, value):
        return state + (1 if self.star or value is not None else 0)

    def merge(self, a, b):
        return a + b


class SumAggregator(Aggregator):
    name = "sum"

    def init(self):
        return None

    def add(self, state, value):
        if value is None:
            return state
        return value if state is None else state + value

    def merge(self, a, b):
        return b if a is None else a if b is None else a + b


class AvgAggregator(Aggregator):
    name = "avg"

    def init(self):
        return (0, 0)

    def add(self, state, value):
        return state if value is None else (state[0] + value, state[1] + 1)

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    def result(self, state):
        return state[0] / state[1] if state[1] else None


class MinAggregator(Aggregator):
    name = "min"

    def init(self):
        return None

    def add(self, state, value):
        return state if value is None else value if state is None else min(state, value)

    def merge(self, a, b):
        return self.add(a, b)


class MaxAggregator(Aggregator):
    name = "max"

    def init(self):
        return None

    def add(self, state, value):
        return state if value is None else value if state is None else max(state, value)

    def merge(self, a, b):
        return self.add(a, b)


class CountDistinctAggregator(Aggregator):
    name = "count_distinct"

    def init(self):
        return set()

    def add(self, state, value):
        if value is not None:
            state.add(value)
        return state

    def merge(self, a, b):
        return a | b

    def result(self, state):
        return len(state)


_BUILTIN = {"count": CountAggregator, "sum": SumAggregator, "avg": AvgAggregator,
            "mean": AvgAggregator, "min": MinAggregator, "max": MaxAggregator,
            "count_distinct": CountDistinctAggregator}


def make_aggregator(fn: Any, column: str = "*") -> Any:
    """Return the aggregator for a name ('count', 'sum', 'avg'/'mean', 'min', 'max',
    'count_distinct') or `fn` itself when it has init/add/merge/result."""
    if isinstance(fn, str):
        cls = _BUILTIN.get(fn.lower())
        if cls is None:
            raise ValueError(f"unknown aggregation {fn!r}: expected one of {sorted(_BUILTIN)} or an aggregator object")
        if cls is CountAggregator:
            return CountAggregator(star=column == "*")
        if column == "*":
            raise ValueError(f"{fn}('*') needs a column")
        return cls()
    for method in ("init", "add", "merge", "result"):
        if not callable(getattr(fn, method, None)):
            raise TypeError(f"custom aggregators need init/add/merge/result; {fn!r} lacks {method}()")
    return fn
