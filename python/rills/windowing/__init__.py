"""Seed 001's windowing: tumbling and sliding windows over event dicts."""

from .sliding_window import SlidingWindow
from .tumbling_window import TumblingWindow
from .window_functions import Window, WindowBase

__all__ = ["TumblingWindow", "SlidingWindow", "Window", "WindowBase"]
