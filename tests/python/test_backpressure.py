"""Bounded connector buffers and their overflow strategies."""

import pyarrow as pa
import pytest

from rills import MemoryConnector


def test_drop_oldest_slices_across_batches():
    c = MemoryConnector("target", max_buffer_records=3, on_overflow="drop_oldest")
    c.push(pa.table({"v": [1, 2, 3]}))
    c.push(pa.table({"v": [4, 5]}))
    batch = c.read_batch()
    assert batch.column("v").to_pylist() == [3, 4, 5]
    assert c.stats()["dropped_records"] == 2
    assert c.read_batch() is None


def test_drop_newest_keeps_buffered_rows():
    c = MemoryConnector("target", max_buffer_records=3, on_overflow="drop_newest")
    c.push({"v": [1, 2]})
    c.push({"v": [3, 4, 5]})
    assert c.read_batch().column("v").to_pylist() == [1, 2, 3]


def test_error_refuses_whole_push():
    c = MemoryConnector("target", max_buffer_records=2, on_overflow="error")
    c.push(pa.table({"v": [1, 2]}))
    with pytest.raises(BufferError):
        c.push(pa.table({"v": [3]}))
    assert c.read_batch().column("v").to_pylist() == [1, 2]
    assert c.stats()["refused_records"] == 1


def test_byte_limit():
    c = MemoryConnector("target", max_buffer_bytes=8 * 100, on_overflow="drop_oldest")
    c.push({"v": list(range(100))})
    c.push({"v": list(range(100, 200))})
    kept = c.read_batch().column("v").to_pylist()
    assert kept[-1] == 199 and len(kept) <= 100


def test_unbounded_by_default_and_bad_arguments():
    c = MemoryConnector("target")
    c.push({"v": list(range(250_000))})
    assert c.buffered_records == 250_000
    with pytest.raises(ValueError, match="on_overflow"):
        MemoryConnector("t", on_overflow="explode")
    with pytest.raises(ValueError, match="max_buffer_records"):
        MemoryConnector("t", max_buffer_records=-1)
    with pytest.raises(TypeError, match="MemoryConnector.push"):
        c.push("not data")
    c.push([])  # empty pushes are ignored
    c.push({})
