"""Seed 001's stream analytics: metrics with statistics, rates and history."""

from .analytics_engine import AnalyticsEngine
from .stream_analytics import StreamAnalytics

__all__ = ["StreamAnalytics", "AnalyticsEngine"]
