"""Bounded connector buffers and their overflow strategies."""

import pyarrow as pa
import pytest

from rills import MemoryConnector, RillEngine


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


def _int64_bytes(rows):
    # The buffer counts the Arrow buffers a batch references: an int64 column
    # without nulls has no validity bitmap, only 8 bytes of data per row.
    batch = pa.record_batch({"v": pa.array(range(rows), pa.int64())})
    assert batch.column(0).buffers()[0] is None
    return 8 * rows


@pytest.mark.parametrize(
    "on_overflow, expected",
    [
        # 1600 bytes pushed into 1200: the oldest 400 bytes (50 rows) are dropped.
        ("drop_oldest", list(range(50, 200))),
        # 800 buffered, 400 bytes of room: the first 50 rows of the second push fit.
        ("drop_newest", list(range(0, 150))),
    ],
)
def test_byte_limit_keeps_exactly_what_fits(on_overflow, expected):
    limit = _int64_bytes(150)
    c = MemoryConnector("target", max_buffer_bytes=limit, on_overflow=on_overflow)
    c.push({"v": pa.array(range(100), pa.int64())})
    assert c.stats()["buffered_bytes"] == _int64_bytes(100)
    c.push({"v": pa.array(range(100, 200), pa.int64())})
    stats = c.stats()
    assert stats["buffered_records"] == 150
    assert stats["buffered_bytes"] == limit
    assert stats["dropped_records"] == 50
    assert c.read_batch().column("v").to_pylist() == expected
    assert c.stats()["buffered_bytes"] == 0


def test_byte_limit_drops_whole_batches_when_they_exactly_fit():
    c = MemoryConnector("target", max_buffer_bytes=_int64_bytes(100), on_overflow="drop_oldest")
    c.push({"v": list(range(100))})
    c.push({"v": list(range(100, 200))})
    assert c.read_batch().column("v").to_pylist() == list(range(100, 200))
    assert c.stats()["dropped_records"] == 100


def test_byte_limit_error_refuses_what_does_not_fit():
    c = MemoryConnector("target", max_buffer_bytes=_int64_bytes(150), on_overflow="error")
    c.push({"v": list(range(100))})
    with pytest.raises(BufferError, match="max_buffer_bytes=1200"):
        c.push({"v": list(range(100, 151))})  # 51 rows: 8 bytes too many
    c.push({"v": list(range(100, 150))})  # 50 rows: exactly full
    assert c.read_batch().column("v").to_pylist() == list(range(150))
    assert c.stats()["refused_records"] == 51


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


def test_max_records_per_tick_takes_the_oldest_rows_and_leaves_the_rest_buffered():
    engine = RillEngine(metrics_path=None, max_records_per_tick=40)
    engine.register_table("t", pa.schema([("id", pa.int64())]), primary_key="id")
    c = MemoryConnector("t")
    engine.add_connector(c)
    for first in range(0, 100, 25):
        c.push(pa.table({"id": pa.array(range(first, first + 25), pa.int64())}))
    engine.step()
    assert engine.query_sql("SELECT min(id), max(id), count(*) FROM t").to_pylist() == [
        {"min(id)": 0, "max(id)": 39, "count_star()": 40}
    ]
    assert c.buffered_records == 60
    engine.step()
    engine.step()
    assert engine.query_sql("SELECT count(DISTINCT id) AS n FROM t").column("n").to_pylist() == [100]
    assert c.buffered_records == 0


def test_max_records_per_tick_must_not_be_negative():
    with pytest.raises(ValueError, match="max_records_per_tick"):
        RillEngine(metrics_path=None, max_records_per_tick=-1)
