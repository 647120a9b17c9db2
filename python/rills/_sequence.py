"""EngineList: a live list-like view of what a C++ engine holds (private)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, Generic, Iterable, Iterator, List, TypeVar, Union

T = TypeVar("T")


class EngineList(Sequence, Generic[T]):
    """The connectors or tasks of an engine, read from the C++ engine on every use.

    Behaves like a list ordered by name: len(), iteration, indexing, `in`
    and == against a list reflect the engine at the time of the call.
    append()/extend() add to the running engine (like add_connector /
    add_sql_task / add_join_task), remove(), pop() and del remove from it.
    Other list mutations (insert, item assignment, sort) raise TypeError: the
    engine orders its items by name.
    """

    def __init__(
        self,
        what: str,
        items: Callable[[], List[T]],
        add: Callable[[T], None],
        remove: Callable[[T], None],
    ):
        self._what = what
        self._items = items
        self._add = add
        self._remove = remove

    # Reading -------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._items())

    def __iter__(self) -> Iterator[T]:
        return iter(self._items())

    def __getitem__(self, index: Union[int, slice]) -> Any:
        return self._items()[index]

    def __contains__(self, item: object) -> bool:
        return item in self._items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EngineList):
            return self._items() == other._items()
        if isinstance(other, (list, tuple)):
            return self._items() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._items())

    # Changing the engine -------------------------------------------------------

    def append(self, item: T) -> None:
        """Add `item` to the engine (running or not)."""
        self._add(item)

    def extend(self, items: Iterable[T]) -> None:
        """Add every item of `items` to the engine."""
        for item in list(items):
            self._add(item)

    def remove(self, item: T) -> None:
        """Remove `item` from the engine; ValueError if the engine does not hold it."""
        if item not in self._items():
            raise ValueError(f"{item!r} is not one of this engine's {self._what}")
        self._remove(item)

    def pop(self, index: int = -1) -> T:
        """Remove and return the item at `index` (default: the last by name)."""
        item = self._items()[index]
        self._remove(item)
        return item

    def clear(self) -> None:
        """Remove every item from the engine."""
        for item in self._items():
            self._remove(item)

    def __delitem__(self, index: Union[int, slice]) -> None:
        selected = self._items()[index]
        for item in selected if isinstance(index, slice) else [selected]:
            self._remove(item)

    def __iadd__(self, items: Iterable[T]) -> "EngineList[T]":
        self.extend(items)
        return self

    def _unordered(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            f"the engine keeps its {self._what} ordered by name: use append() or remove()"
        )

    insert = __setitem__ = sort = reverse = _unordered
