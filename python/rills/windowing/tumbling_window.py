"""TumblingWindow(duration): fixed-size, non-overlapping windows.

    window = TumblingWindow(duration=10)
    window.add_event({"value": 10, "timestamp": time.time()})
    closed = window.get_closed_windows()
    total = window.aggregate(lambda events: sum(e["value"] for e in events))
"""

from .window_functions import WindowBase

__all__ = ["TumblingWindow"]


class TumblingWindow(WindowBase):
    """Windows [k*duration, (k+1)*duration); each event is in exactly one."""

    def __init__(self, duration: float, max_closed: int = 1000):
        super().__init__(duration, duration, max_closed)
        self.duration = float(duration)

    def __repr__(self) -> str:
        return f"<TumblingWindow(duration={self.duration})>"
