"""SlidingWindow(size, slide): overlapping windows of `size` seconds every `slide`.

    window = SlidingWindow(size=30, slide=10)
    window.add_event({"value": 10, "timestamp": time.time()})
    window.get_current_window()["count"]
"""

from .window_functions import WindowBase

__all__ = ["SlidingWindow"]


class SlidingWindow(WindowBase):
    """Windows [k*slide, k*slide + size); an event is in every window containing it."""

    def __init__(self, size: float, slide: float, max_closed: int = 1000):
        super().__init__(size, slide, max_closed)

    def _current(self):
        # The oldest open window containing the latest event: the full `size`
        # seconds of recent history (the newest one holds only the last slide).
        containing = [w for w in self._open.values() if w.start <= self._max_ts < w.end]
        if not containing:
            return super()._current()
        return min(containing, key=lambda w: w.start)

    def __repr__(self) -> str:
        return f"<SlidingWindow(size={self.size}, slide={self.slide})>"
