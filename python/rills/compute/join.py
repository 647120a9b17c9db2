"""Join/aggregate tasks over two live tables (seed path `rills.compute.join`)."""

from ..tasks import TableJoinTask

__all__ = ["TableJoinTask"]
