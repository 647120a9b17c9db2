"""Seed 001's aggregation pipelines: group by, aggregators, stages, SQLite results."""

from .aggregation_pipeline import AggregationPipeline
from .aggregators import (Aggregator, AvgAggregator, CountAggregator, CountDistinctAggregator,
                          MaxAggregator, MinAggregator, SumAggregator, make_aggregator)
from .pipeline_store import PipelineStore

__all__ = ["AggregationPipeline", "Aggregator", "CountAggregator", "SumAggregator",
           "AvgAggregator", "MinAggregator", "MaxAggregator", "CountDistinctAggregator",
           "make_aggregator", "PipelineStore"]
