"""pyarrow in and out without copying (Arrow C stream interface)."""

import pyarrow as pa

from rills import MemoryConnector, RillTable, schema


def _buffer_addresses(array):
    return [b.address for b in array.buffers() if b is not None]


def test_pushed_column_is_read_back_without_copy(engine):
    values = pa.array(range(100_000), pa.int64())
    names = pa.array([f"n{i}" for i in range(100_000)])
    data = pa.table({"id": values, "name": names})
    engine.register_table("events", schema=schema([("id", pa.int64()), ("name", pa.string())]))
    c = MemoryConnector("events")
    engine.add_connector(c)
    c.push(data)
    engine.step()
    out = engine.get_table("events").to_arrow()
    assert out.column("id").num_chunks == 1
    assert _buffer_addresses(out.column("id").chunk(0)) == _buffer_addresses(data.column("id").chunk(0))
    assert _buffer_addresses(out.column("name").chunk(0)) == _buffer_addresses(
        data.column("name").chunk(0))


def test_table_upsert_and_to_arrow_share_buffers():
    t = RillTable("t", primary_key="k")
    batch = pa.RecordBatch.from_pydict({"k": [1, 2, 3], "v": [1.5, 2.5, 3.5]})
    t.upsert(batch)
    out = t.to_arrow()
    assert _buffer_addresses(out.column("v").chunk(0)) == _buffer_addresses(batch.column(1))
    # Two reads of an unchanged table share the same memory too.
    again = t.to_arrow()
    assert _buffer_addresses(again.column("v").chunk(0)) == _buffer_addresses(batch.column(1))


def test_imports_any_arrow_stream_producer(engine):
    class Producer:
        def __init__(self, table):
            self.table = table

        def __arrow_c_stream__(self, requested_schema=None):
            return self.table.__arrow_c_stream__(requested_schema)

    t = engine.register_table("p", primary_key="a")
    t.upsert(Producer(pa.table({"a": [1, 2]})))
    reader = pa.RecordBatchReader.from_batches(pa.schema([("a", pa.int64())]),
                                               [pa.record_batch({"a": [3]})])
    t.upsert(reader)
    assert sorted(t.to_arrow().column("a").to_pylist()) == [1, 2, 3]
