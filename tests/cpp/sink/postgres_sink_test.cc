// PostgresSinkWriter against a real PostgreSQL (pg_test_server.h), with
// hand-built change sets.
#include <fcntl.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

#include "rill/sink/postgres_sink.h"
#include "sink/pg_test_server.h"

namespace rill {
namespace {

using testing::PgTestServer;

std::shared_ptr<arrow::Schema> ItemSchema() {
  return arrow::schema({arrow::field("id", arrow::int64(), /*nullable=*/false),
                        arrow::field("name", arrow::utf8()),
                        arrow::field("price", arrow::float64())});
}

/// A change batch of `table_schema` from JSON objects (with "_op", "_version").
std::shared_ptr<arrow::RecordBatch> Batch(const std::shared_ptr<arrow::Schema>& table_schema,
                                          const std::string& json) {
  auto schema = ChangeSchema(table_schema);
  auto array = arrow::json::ArrayFromJSONString(arrow::struct_(schema->fields()), json);
  EXPECT_TRUE(array.ok()) << array.status().ToString();
  auto batch = arrow::RecordBatch::FromStructArray(*array);
  EXPECT_TRUE(batch.ok()) << batch.status().ToString();
  return (*batch)->ReplaceSchema(schema).ValueOrDie();
}

ChangeSet Changes(const std::shared_ptr<arrow::Schema>& table_schema, const std::string& json,
                  uint64_t from, uint64_t to, bool snapshot = false) {
  ChangeSet changes;
  changes.from_version = from;
  changes.to_version = to;
  changes.snapshot = snapshot;
  changes.batches.push_back(Batch(table_schema, json));
  changes.num_rows = changes.batches.back()->num_rows();
  return changes;
}

/// The test's own connection to `dsn` (one per process: connecting costs a
/// server process).
PGconn* Checker(const std::string& dsn) {
  // Closed at exit, before LeakSanitizer looks (every test is its own process
  // under ctest, and LSan fails one that ends with a connection still open).
  struct Connections {
    std::map<std::string, PGconn*> by_dsn;
    ~Connections() {
      for (auto& [unused, conn] : by_dsn) {
        if (conn != nullptr) PQfinish(conn);
      }
    }
  };
  static Connections connections;
  PGconn*& conn = connections.by_dsn[dsn];
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
    if (conn != nullptr) PQfinish(conn);
    conn = PQconnectdb(dsn.c_str());
  }
  EXPECT_EQ(PQstatus(conn), CONNECTION_OK) << PQerrorMessage(conn);
  return conn;
}

/// The rows of `sql` as "a|b|c" (NULL as "null").
std::vector<std::string> Rows(const std::string& dsn, const std::string& sql) {
  PGconn* conn = Checker(dsn);
  std::vector<std::string> rows;
  PGresult* result = PQexec(conn, ("SET TimeZone = 'UTC'; " + sql).c_str());
  EXPECT_EQ(PQresultStatus(result), PGRES_TUPLES_OK) << PQresultErrorMessage(result);
  for (int r = 0; r < PQntuples(result); ++r) {
    std::string row;
    for (int c = 0; c < PQnfields(result); ++c) {
      if (c > 0) row += "|";
      row += PQgetisnull(result, r, c) ? "null" : PQgetvalue(result, r, c);
    }
    rows.push_back(row);
  }
  PQclear(result);
  return rows;
}

void Exec(const std::string& dsn, const std::string& sql) {
  PGconn* conn = Checker(dsn);
  PGresult* result = PQexec(conn, sql.c_str());
  EXPECT_TRUE(PQresultStatus(result) == PGRES_COMMAND_OK ||
              PQresultStatus(result) == PGRES_TUPLES_OK)
      << PQresultErrorMessage(result);
  PQclear(result);
}

/// A table name no other test of this process uses.
std::string FreshTable(const std::string& stem) {
  static std::atomic<int> next{0};
  std::string name = stem + "_" + std::to_string(getpid()) + "_" + std::to_string(next++);
  return name;
}

std::unique_ptr<SinkWriter> MakeWriter(const std::string& dsn, const std::string& table,
                                       std::optional<SinkMode> mode, bool create = true,
                                       const std::string& sink = "") {
  PostgresSinkOptions options;
  options.dsn = dsn;
  options.target_table = table;
  options.create_table = create;
  options.mode = mode;
  options.sink_name = sink.empty() ? table : sink;
  auto writer = MakePostgresSinkWriter(std::move(options));
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  return std::move(*writer);
}

TEST(PostgresSinkWriter, UpsertsInsertsUpdatesAndDeletesByKey) {
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("upsert");
  auto writer = MakeWriter(server->dsn(), table, SinkMode::kUpsert);
  ASSERT_TRUE(writer->Open(ItemSchema(), {"id"}).ok());
  ASSERT_TRUE(writer->Write(Changes(ItemSchema(), R"([
      {"id": 1, "name": "a", "price": 1.5, "_op": "insert", "_version": 1},
      {"id": 2, "name": "b", "price": 2.5, "_op": "insert", "_version": 1},
      {"id": 3, "name": null, "price": 3.5, "_op": "insert", "_version": 1}])", 0, 1),
                            SinkMode::kUpsert)
                  .ok());
  ASSERT_TRUE(writer->Commit({1}).ok());
  auto status = writer->Write(Changes(ItemSchema(), R"([
      {"id": 3, "name": null, "price": 3.5, "_op": "delete", "_version": 2},
      {"id": 2, "name": "b2", "price": 20.0, "_op": "update", "_version": 2},
      {"id": 4, "name": "d", "price": null, "_op": "insert", "_version": 2}])", 1, 2),
                              SinkMode::kUpsert);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_TRUE(writer->Commit({2}).ok());
  EXPECT_EQ(Rows(server->dsn(), "SELECT id, name, price FROM " + table + " ORDER BY id"),
            (std::vector<std::string>{"1|a|1.5", "2|b2|20", "4|d|null"}));
  EXPECT_EQ(Rows(server->dsn(),
                 "SELECT version FROM rill_sink_progress WHERE sink = '" + table + "'"),
            (std::vector<std::string>{"2"}));
  EXPECT_GT(writer->bytes_written(), 0);
}

TEST(PostgresSinkWriter, UpsertsInsertsOfKeysTheTargetAlreadyHolds) {
  // Inserts only go straight into the target by COPY; a key the target holds
  // already (a replay after a crash) sends the batch through the staging table.
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("replay");
  auto writer = MakeWriter(server->dsn(), table, SinkMode::kUpsert);
  ASSERT_TRUE(writer->Open(ItemSchema(), {"id"}).ok());
  for (int round = 0; round < 3; ++round) {
    auto status = writer->Write(Changes(ItemSchema(), R"([
        {"id": 1, "name": "a", "price": 1.0, "_op": "insert", "_version": 1},
        {"id": 2, "name": "b", "price": 2.0, "_op": "insert", "_version": 1}])", 0, 1),
                                SinkMode::kUpsert);
    ASSERT_TRUE(status.ok()) << status.ToString();
    ASSERT_TRUE(writer->Commit({1}).ok());
  }
  auto status = writer->Write(Changes(ItemSchema(), R"([
      {"id": 2, "name": "b2", "price": 2.0, "_op": "insert", "_version": 2},
      {"id": 3, "name": "c", "price": 3.0, "_op": "insert", "_version": 2}])", 1, 2),
                              SinkMode::kUpsert);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_TRUE(writer->Commit({2}).ok());
  EXPECT_EQ(Rows(server->dsn(), "SELECT id, name FROM " + table + " ORDER BY id"),
            (std::vector<std::string>{"1|a", "2|b2", "3|c"}));
}

TEST(PostgresSinkWriter, MatchesAReferenceAfterRandomUpsertsAndDeletes) {
  // Random coalesced change sets (each key once: insert, update or delete),
  // some split over two Writes of one unit, some aborted: after every commit the
  // target equals a map kept alongside. Replay with the seed in the message.
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("random");
  auto writer = MakeWriter(server->dsn(), table, SinkMode::kUpsert);
  ASSERT_TRUE(writer->Open(ItemSchema(), {"id"}).ok());
  const uint32_t seed = 24;
  std::mt19937 rng(seed);
  std::map<int64_t, std::string> reference;
  for (uint64_t version = 1; version <= 25; ++version) {
    std::map<int64_t, std::string> next = reference;
    std::vector<std::string> rows;
    std::set<int64_t> keys;
    int n = static_cast<int>(rng() % 40) + 1;
    for (int i = 0; i < n; ++i) keys.insert(static_cast<int64_t>(rng() % 60));
    for (int64_t key : keys) {
      std::string op;
      std::string name = "n" + std::to_string(rng() % 1000);
      if (next.count(key) > 0 && rng() % 3 == 0) {
        op = "delete";
        next.erase(key);
      } else {
        op = next.count(key) > 0 ? "update" : "insert";
        next[key] = name;
      }
      rows.push_back("{\"id\": " + std::to_string(key) + ", \"name\": \"" + name +
                     "\", \"price\": 1.0, \"_op\": \"" + op + "\", \"_version\": " +
                     std::to_string(version) + "}");
    }
    size_t split = rows.size() / 2;
    auto json = [&](size_t begin, size_t end) {
      std::string out = "[";
      for (size_t i = begin; i < end; ++i) out += (i > begin ? "," : "") + rows[i];
      return out + "]";
    };
    ASSERT_TRUE(writer->Write(Changes(ItemSchema(), json(0, split), version - 1, version),
                              SinkMode::kUpsert)
                    .ok());
    ASSERT_TRUE(writer->Write(Changes(ItemSchema(), json(split, rows.size()), version - 1,
                                      version),
                              SinkMode::kUpsert)
                    .ok());
    if (rng() % 5 == 0) {
      writer->Abort();  // the unit is gone; the reference stays as it was
      --version;
      continue;
    }
    ASSERT_TRUE(writer->Commit({version}).ok());
    reference = next;
    std::vector<std::string> expected;
    for (const auto& [key, name] : reference) {
      expected.push_back(std::to_string(key) + "|" + name);
    }
    ASSERT_EQ(Rows(server->dsn(), "SELECT id, name FROM " + table + " ORDER BY id"), expected)
        << "seed " << seed << ", version " << version;
  }
}

TEST(PostgresSinkWriter, WritesEveryChangeWithItsOpAndVersionInChangelogMode) {
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("changelog");
  auto writer = MakeWriter(server->dsn(), table, SinkMode::kChangelog);
  ASSERT_TRUE(writer->Open(ItemSchema(), {"id"}).ok());
  ASSERT_TRUE(writer->Write(Changes(ItemSchema(), R"([
      {"id": 1, "name": "a", "price": 1.0, "_op": "insert", "_version": 1},
      {"id": 1, "name": "a", "price": 1.0, "_op": "update_before", "_version": 2},
      {"id": 1, "name": "a", "price": 2.0, "_op": "update", "_version": 2},
      {"id": 1, "name": "a", "price": 2.0, "_op": "delete", "_version": 3}])", 0, 3),
                            SinkMode::kChangelog)
                  .ok());
  ASSERT_TRUE(writer->Commit({3}).ok());
  EXPECT_EQ(Rows(server->dsn(), "SELECT id, price, _op, _version FROM " + table +
                                    " ORDER BY _version, _op DESC"),
            (std::vector<std::string>{"1|1|insert|1", "1|1|update_before|2", "1|2|update|2",
                                      "1|2|delete|3"}));
  // A changelog target has no primary key: a key may appear many times.
  EXPECT_EQ(Rows(server->dsn(), "SELECT count(*) FROM pg_index WHERE indrelid = '" + table +
                                    "'::regclass"),
            (std::vector<std::string>{"0"}));
}

TEST(PostgresSinkWriter, AppendsRowsInAppendMode) {
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("append");
  auto schema = arrow::schema({arrow::field("id", arrow::int64()),
                               arrow::field("name", arrow::utf8()),
                               arrow::field("price", arrow::float64())});
  auto writer = MakeWriter(server->dsn(), table, SinkMode::kAppend);
  ASSERT_TRUE(writer->Open(schema, {}).ok());
  for (uint64_t v = 1; v <= 2; ++v) {
    ASSERT_TRUE(writer->Write(Changes(schema, R"([
        {"id": 7, "name": "x\ty\nz", "price": 1.0, "_op": "insert", "_version": 1},
        {"id": 8, "name": "", "price": 2.0, "_op": "insert", "_version": 1}])", v - 1, v),
                              SinkMode::kAppend)
                    .ok());
    ASSERT_TRUE(writer->Commit({v}).ok());
  }
  EXPECT_EQ(Rows(server->dsn(), "SELECT id, count(*), min(name) = E'x\\ty\\nz' OR min(name) = '' "
                                "FROM " + table + " GROUP BY id ORDER BY id"),
            (std::vector<std::string>{"7|2|t", "8|2|t"}));
}

TEST(PostgresSinkWriter, CreatesTheTargetWithMappedTypes) {
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("types");
  auto schema = arrow::schema({
      arrow::field("k", arrow::int32(), /*nullable=*/false),
      arrow::field("i8", arrow::int8()),
      arrow::field("i16", arrow::int16()),
      arrow::field("i64", arrow::int64()),
      arrow::field("u8", arrow::uint8()),
      arrow::field("u16", arrow::uint16()),
      arrow::field("u32", arrow::uint32()),
      arrow::field("u64", arrow::uint64()),
      arrow::field("f32", arrow::float32()),
      arrow::field("f64", arrow::float64()),
      arrow::field("b", arrow::boolean()),
      arrow::field("s", arrow::utf8()),
      arrow::field("ls", arrow::large_utf8()),
      arrow::field("bin", arrow::binary()),
      arrow::field("ts", arrow::timestamp(arrow::TimeUnit::MICRO, "UTC")),
      arrow::field("ts_ms", arrow::timestamp(arrow::TimeUnit::MILLI)),
      arrow::field("ts_ns", arrow::timestamp(arrow::TimeUnit::NANO, "UTC")),
      arrow::field("d", arrow::date32()),
      arrow::field("t", arrow::time64(arrow::TimeUnit::MICRO)),
      arrow::field("dec", arrow::decimal128(10, 2)),
      arrow::field("lst", arrow::list(arrow::int32())),
      arrow::field("st", arrow::struct_({arrow::field("a", arrow::int32()),
                                         arrow::field("b", arrow::utf8())})),
      arrow::field("z_update_ts", arrow::float64()),
  });
  auto writer = MakeWriter(server->dsn(), table, SinkMode::kUpsert);
  auto status = writer->Open(schema, {"k"});
  ASSERT_TRUE(status.ok()) << status.ToString();
  status = writer->Write(Changes(schema, R"([
      {"k": 1, "i8": -8, "i16": -16, "i64": -9007199254740993, "u8": 255, "u16": 65535,
       "u32": 4294967295, "u64": 18446744073709551615, "f32": 0.5, "f64": -1.25, "b": true,
       "s": "héllo", "ls": "large", "bin": "AB", "ts": 1764583200000000,
       "ts_ms": -1000, "ts_ns": 1764583200123456789, "d": 20423, "t": 3723000001,
       "dec": "-12345678.91", "lst": [1, null, 3], "st": {"a": 1, "b": "q\"x"},
       "z_update_ts": 1.5, "_op": "insert", "_version": 1},
      {"k": 2, "_op": "insert", "_version": 1}])", 0, 1),
                         SinkMode::kUpsert);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_TRUE(writer->Commit({1}).ok());
  EXPECT_EQ(Rows(server->dsn(),
                 "SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' "
                 "ORDER BY attnum) FROM pg_attribute WHERE attrelid = '" + table +
                     "'::regclass AND attnum > 0"),
            (std::vector<std::string>{
                "k integer, i8 smallint, i16 smallint, i64 bigint, u8 smallint, u16 integer, "
                "u32 bigint, u64 numeric(20,0), f32 real, f64 double precision, b boolean, "
                "s text, ls text, bin bytea, ts timestamp with time zone, "
                "ts_ms timestamp without time zone, ts_ns timestamp with time zone, d date, "
                "t time without time zone, dec numeric(10,2), lst jsonb, st jsonb, "
                "z_update_ts double precision"}));
  EXPECT_EQ(Rows(server->dsn(), "SELECT * FROM " + table + " ORDER BY k"),
            (std::vector<std::string>{
                "1|-8|-16|-9007199254740993|255|65535|4294967295|18446744073709551615|0.5|"
                "-1.25|t|héllo|large|\\x4142|2025-12-01 10:00:00+00|1969-12-31 23:59:59|"
                "2025-12-01 10:00:00.123456+00|2025-12-01|01:02:03.000001|-12345678.91|"
                "[1, null, 3]|{\"a\": 1, \"b\": \"q\\\"x\"}|1.5",
                "2|null|null|null|null|null|null|null|null|null|null|null|null|null|null|"
                "null|null|null|null|null|null|null|null"}));
  EXPECT_EQ(Rows(server->dsn(), "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON "
                                "a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE "
                                "i.indisprimary AND i.indrelid = '" + table + "'::regclass"),
            (std::vector<std::string>{"k"}));
}

TEST(PostgresSinkWriter, LoadsTheProgressItCommittedAfterReopening) {
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("progress");
  {
    auto writer = MakeWriter(server->dsn(), table, SinkMode::kUpsert, true, table + "_a");
    ASSERT_TRUE(writer->Open(ItemSchema(), {"id"}).ok());
    auto none = writer->LoadProgress();
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value());
    ASSERT_TRUE(writer->Commit({/*version=*/7, /*epoch=*/3}).ok());
    writer->Close();
    writer->Close();  // twice is fine
  }
  auto writer = MakeWriter(server->dsn(), table, SinkMode::kUpsert, true, table + "_a");
  ASSERT_TRUE(writer->Open(ItemSchema(), {"id"}).ok());
  auto progress = writer->LoadProgress();
  ASSERT_TRUE(progress.ok());
  ASSERT_TRUE(progress->has_value());
  EXPECT_EQ((*progress)->version, 7u);
  EXPECT_EQ((*progress)->epoch, 3u);
  auto other = MakeWriter(server->dsn(), table, SinkMode::kUpsert, true, table + "_b");
  ASSERT_TRUE(other->Open(ItemSchema(), {"id"}).ok());
  EXPECT_FALSE(other->LoadProgress()->has_value());
}

TEST(PostgresSinkWriter, LeavesNothingOfAFailedTransaction) {
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("failed");
  auto writer = MakeWriter(server->dsn(), table, SinkMode::kUpsert);
  ASSERT_TRUE(writer->Open(ItemSchema(), {"id"}).ok());
  ASSERT_TRUE(writer->Write(Changes(ItemSchema(), R"([
      {"id": 1, "name": "a", "price": 1.0, "_op": "insert", "_version": 1}])", 0, 1),
                            SinkMode::kUpsert)
                  .ok());
  ASSERT_TRUE(writer->Commit({1}).ok());
  // One unit: a good write, then a row with a NULL key (refused by the PRIMARY KEY).
  ASSERT_TRUE(writer->Write(Changes(ItemSchema(), R"([
      {"id": 1, "name": "changed", "price": 9.0, "_op": "update", "_version": 2},
      {"id": 5, "name": "e", "price": 5.0, "_op": "insert", "_version": 2}])", 1, 2),
                            SinkMode::kUpsert)
                  .ok());
  auto status = writer->Write(Changes(ItemSchema(), R"([
      {"id": null, "name": "bad", "price": 0.0, "_op": "insert", "_version": 3}])", 2, 3),
                              SinkMode::kUpsert);
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(status.IsInvalid()) << status.ToString();
  EXPECT_NE(status.message().find("23502"), std::string::npos) << status.ToString();
  writer->Abort();
  EXPECT_EQ(Rows(server->dsn(), "SELECT id, name FROM " + table + " ORDER BY id"),
            (std::vector<std::string>{"1|a"}));
  EXPECT_EQ(Rows(server->dsn(),
                 "SELECT version FROM rill_sink_progress WHERE sink = '" + table + "'"),
            (std::vector<std::string>{"1"}));
  // The writer goes on after the abort.
  ASSERT_TRUE(writer->Write(Changes(ItemSchema(), R"([
      {"id": 5, "name": "e", "price": 5.0, "_op": "insert", "_version": 2}])", 1, 2),
                            SinkMode::kUpsert)
                  .ok());
  ASSERT_TRUE(writer->Commit({2}).ok());
  EXPECT_EQ(Rows(server->dsn(), "SELECT id FROM " + table + " ORDER BY id"),
            (std::vector<std::string>{"1", "5"}));
}

TEST(PostgresSinkWriter, LeavesNothingWhenClosedBeforeCommit) {
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("uncommitted");
  auto writer = MakeWriter(server->dsn(), table, SinkMode::kUpsert);
  ASSERT_TRUE(writer->Open(ItemSchema(), {"id"}).ok());
  ASSERT_TRUE(writer->Write(Changes(ItemSchema(), R"([
      {"id": 1, "name": "a", "price": 1.0, "_op": "insert", "_version": 1}])", 0, 1),
                            SinkMode::kUpsert)
                  .ok());
  writer->Close();
  EXPECT_EQ(Rows(server->dsn(), "SELECT count(*) FROM " + table),
            (std::vector<std::string>{"0"}));
}

TEST(PostgresSinkWriter, ReplacesWhatTheTargetHeldWithASnapshot) {
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("snapshot");
  auto writer = MakeWriter(server->dsn(), table, SinkMode::kUpsert);
  ASSERT_TRUE(writer->Open(ItemSchema(), {"id"}).ok());
  ASSERT_TRUE(writer->Write(Changes(ItemSchema(), R"([
      {"id": 1, "name": "a", "price": 1.0, "_op": "insert", "_version": 1},
      {"id": 2, "name": "b", "price": 2.0, "_op": "insert", "_version": 1},
      {"id": 3, "name": "c", "price": 3.0, "_op": "insert", "_version": 1}])", 0, 1),
                            SinkMode::kUpsert)
                  .ok());
  ASSERT_TRUE(writer->Commit({1}).ok());
  ASSERT_TRUE(writer->Write(Changes(ItemSchema(), R"([
      {"id": 2, "name": "b2", "price": 2.0, "_op": "insert", "_version": 9},
      {"id": 5, "name": "e", "price": 5.0, "_op": "insert", "_version": 9}])", 1, 9,
                                    /*snapshot=*/true),
                            SinkMode::kUpsert)
                  .ok());
  ASSERT_TRUE(writer->Commit({9}).ok());
  EXPECT_EQ(Rows(server->dsn(), "SELECT id, name FROM " + table + " ORDER BY id"),
            (std::vector<std::string>{"2|b2", "5|e"}));
  // An empty snapshot empties the target.
  ChangeSet empty;
  empty.from_version = 9;
  empty.to_version = 10;
  empty.snapshot = true;
  ASSERT_TRUE(writer->Write(empty, SinkMode::kUpsert).ok());
  ASSERT_TRUE(writer->Commit({10}).ok());
  EXPECT_EQ(Rows(server->dsn(), "SELECT count(*) FROM " + table),
            (std::vector<std::string>{"0"}));
}

TEST(PostgresSinkWriter, ReplacesTheTargetWithASnapshotSplitOverWrites) {
  // The Sink splits a large snapshot by max_batch_rows; only the first part says
  // snapshot. Keys of later parts are gone after the first part and come back.
  RILL_REQUIRE_PG(server);
  for (SinkMode mode : {SinkMode::kUpsert, SinkMode::kAppend}) {
    std::string table = FreshTable("split");
    auto writer = MakeWriter(server->dsn(), table, mode);
    ASSERT_TRUE(writer->Open(ItemSchema(), {"id"}).ok());
    ASSERT_TRUE(writer->Write(Changes(ItemSchema(), R"([
        {"id": 1, "name": "a", "price": 1.0, "_op": "insert", "_version": 1},
        {"id": 2, "name": "b", "price": 2.0, "_op": "insert", "_version": 1},
        {"id": 3, "name": "c", "price": 3.0, "_op": "insert", "_version": 1}])", 0, 1),
                              mode)
                    .ok());
    ASSERT_TRUE(writer->Commit({1}).ok());
    ASSERT_TRUE(writer->Write(Changes(ItemSchema(), R"([
        {"id": 2, "name": "b2", "price": 2.0, "_op": "insert", "_version": 5}])", 1, 5,
                                      /*snapshot=*/true),
                              mode)
                    .ok());
    auto status = writer->Write(Changes(ItemSchema(), R"([
        {"id": 3, "name": "c2", "price": 3.0, "_op": "insert", "_version": 5},
        {"id": 4, "name": "d", "price": 4.0, "_op": "insert", "_version": 5}])", 1, 5),
                                mode);
    ASSERT_TRUE(status.ok()) << status.ToString();
    ASSERT_TRUE(writer->Commit({5}).ok());
    EXPECT_EQ(Rows(server->dsn(), "SELECT id, name FROM " + table + " ORDER BY id"),
              (std::vector<std::string>{"2|b2", "3|c2", "4|d"}))
        << SinkModeName(mode);
  }
}

TEST(PostgresSinkWriter, KeepsTheLastChangePerKeyOfAnUncoalescedSnapshot) {
  // A key changed several times in one snapshot Write (one the Sink read from
  // the start of the log is not coalesced): the last change per key wins.
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("uncoalesced");
  auto writer = MakeWriter(server->dsn(), table, SinkMode::kUpsert);
  ASSERT_TRUE(writer->Open(ItemSchema(), {"id"}).ok());
  for (bool snapshot : {true, true}) {
    auto status = writer->Write(Changes(ItemSchema(), R"([
        {"id": 1, "name": "a", "price": 1.0, "_op": "insert", "_version": 7},
        {"id": 2, "name": "b", "price": 2.0, "_op": "insert", "_version": 7},
        {"id": 1, "name": "a", "price": 1.0, "_op": "update_before", "_version": 8},
        {"id": 1, "name": "a8", "price": 8.0, "_op": "update", "_version": 8},
        {"id": 2, "name": "b", "price": 2.0, "_op": "delete", "_version": 9},
        {"id": 1, "name": "a10", "price": 10.0, "_op": "update", "_version": 10},
        {"id": 3, "name": "c", "price": 3.0, "_op": "insert", "_version": 10}])", 0, 10,
                                        snapshot),
                                SinkMode::kUpsert);
    ASSERT_TRUE(status.ok()) << status.ToString();
    ASSERT_TRUE(writer->Commit({10}).ok());
    EXPECT_EQ(Rows(server->dsn(), "SELECT id, name FROM " + table + " ORDER BY id"),
              (std::vector<std::string>{"1|a10", "3|c"}))
        << "snapshot " << snapshot;
  }
}

TEST(PostgresSinkWriter, RefusesAMissingTargetWithoutCreateTable) {
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("missing");
  auto writer = MakeWriter(server->dsn(), table, std::nullopt, /*create=*/false);
  auto status = writer->Open(ItemSchema(), {"id"});
  ASSERT_TRUE(status.IsKeyError()) << status.ToString();
  EXPECT_NE(status.message().find(table), std::string::npos) << status.ToString();
  EXPECT_NE(status.message().find("create_table"), std::string::npos) << status.ToString();
}

TEST(PostgresSinkWriter, WritesIntoAnExistingTargetAndNamesItsMissingColumns) {
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("existing");
  Exec(server->dsn(), "CREATE TABLE " + table + " (id bigint PRIMARY KEY, name text)");
  auto writer = MakeWriter(server->dsn(), table, SinkMode::kUpsert, /*create=*/false);
  auto status = writer->Open(ItemSchema(), {"id"});
  ASSERT_TRUE(status.IsInvalid()) << status.ToString();
  EXPECT_NE(status.message().find("price"), std::string::npos) << status.ToString();
  Exec(server->dsn(), "ALTER TABLE " + table + " ADD COLUMN price numeric");
  status = writer->Open(ItemSchema(), {"id"});
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_TRUE(writer->Write(Changes(ItemSchema(), R"([
      {"id": 1, "name": "a", "price": 1.25, "_op": "insert", "_version": 1}])", 0, 1),
                            SinkMode::kUpsert)
                  .ok());
  ASSERT_TRUE(writer->Commit({1}).ok());
  EXPECT_EQ(Rows(server->dsn(), "SELECT id, name, price FROM " + table),
            (std::vector<std::string>{"1|a|1.25"}));
}

TEST(PostgresSinkWriter, RefusesAnUpsertTargetWithoutAUniqueKey) {
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("nokey");
  Exec(server->dsn(), "CREATE TABLE " + table + " (id bigint, name text, price float8)");
  auto writer = MakeWriter(server->dsn(), table, SinkMode::kUpsert, /*create=*/false);
  auto status = writer->Open(ItemSchema(), {"id"});
  ASSERT_TRUE(status.IsInvalid()) << status.ToString();
  EXPECT_NE(status.message().find("UNIQUE"), std::string::npos) << status.ToString();
}

TEST(PostgresSinkWriter, NamesTheHostButNotThePasswordWhenItCannotConnect) {
  // No server needed: nothing listens on a port just freed.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  int port = ntohs(addr.sin_port);
  close(fd);
  std::string dsn = "postgresql://rill:s3cr3tpw@127.0.0.1:" + std::to_string(port) + "/db";
  auto writer = MakeWriter(dsn, "t", SinkMode::kUpsert);
  auto status = writer->Open(ItemSchema(), {"id"});
  ASSERT_TRUE(status.IsIOError()) << status.ToString();
  EXPECT_NE(status.message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << status.ToString();
  EXPECT_EQ(status.message().find("s3cr3tpw"), std::string::npos) << status.ToString();
  EXPECT_TRUE(writer->Write(ChangeSet{}, SinkMode::kUpsert).IsIOError());
}

TEST(PostgresSinkWriter, ReportsALostConnectionAndWorksAfterOpeningAgain) {
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("lost");
  auto writer = MakeWriter(server->dsn(), table, SinkMode::kUpsert, true, table);
  ASSERT_TRUE(writer->Open(ItemSchema(), {"id"}).ok());
  ASSERT_TRUE(writer->Write(Changes(ItemSchema(), R"([
      {"id": 1, "name": "a", "price": 1.0, "_op": "insert", "_version": 1}])", 0, 1),
                            SinkMode::kUpsert)
                  .ok());
  Exec(server->dsn(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                      "application_name = 'rill sink " + table + "'");
  auto status = writer->Commit({1});
  ASSERT_TRUE(status.IsIOError()) << status.ToString();
  EXPECT_NE(status.message().find("127.0.0.1:" + std::to_string(server->port())),
            std::string::npos)
      << status.ToString();
  writer->Abort();
  ASSERT_TRUE(writer->Open(ItemSchema(), {"id"}).ok());
  EXPECT_FALSE(writer->LoadProgress()->has_value());
  ASSERT_TRUE(writer->Write(Changes(ItemSchema(), R"([
      {"id": 1, "name": "a", "price": 1.0, "_op": "insert", "_version": 1}])", 0, 1),
                            SinkMode::kUpsert)
                  .ok());
  ASSERT_TRUE(writer->Commit({1}).ok());
  EXPECT_EQ(Rows(server->dsn(), "SELECT id FROM " + table), (std::vector<std::string>{"1"}));
}

TEST(PostgresSinkWriter, FailsNamingTheHostWhileTheServerIsDownAndResumesAfterIt) {
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("outage");
  auto writer = MakeWriter(server->dsn(), table, SinkMode::kUpsert);
  ASSERT_TRUE(writer->Open(ItemSchema(), {"id"}).ok());
  ASSERT_TRUE(writer->Write(Changes(ItemSchema(), R"([
      {"id": 1, "name": "a", "price": 1.0, "_op": "insert", "_version": 1}])", 0, 1),
                            SinkMode::kUpsert)
                  .ok());
  ASSERT_TRUE(writer->Commit({1}).ok());
  ASSERT_TRUE(server->Stop());
  std::string host = "127.0.0.1:" + std::to_string(server->port());
  auto status = writer->Write(Changes(ItemSchema(), R"([
      {"id": 2, "name": "b", "price": 2.0, "_op": "insert", "_version": 2}])", 1, 2),
                              SinkMode::kUpsert);
  ASSERT_TRUE(status.IsIOError()) << status.ToString();
  EXPECT_NE(status.message().find(host), std::string::npos) << status.ToString();
  writer->Abort();
  status = writer->Open(ItemSchema(), {"id"});  // a retry while it is still down
  ASSERT_TRUE(status.IsIOError()) << status.ToString();
  EXPECT_NE(status.message().find(host), std::string::npos) << status.ToString();
  ASSERT_TRUE(server->Restart());
  ASSERT_TRUE(writer->Open(ItemSchema(), {"id"}).ok());
  auto progress = writer->LoadProgress();
  ASSERT_TRUE(progress.ok() && progress->has_value());
  EXPECT_EQ((*progress)->version, 1u);
  ASSERT_TRUE(writer->Write(Changes(ItemSchema(), R"([
      {"id": 2, "name": "b", "price": 2.0, "_op": "insert", "_version": 2}])", 1, 2),
                            SinkMode::kUpsert)
                  .ok());
  ASSERT_TRUE(writer->Commit({2}).ok());
  EXPECT_EQ(Rows(server->dsn(), "SELECT id FROM " + table + " ORDER BY id"),
            (std::vector<std::string>{"1", "2"}));
}

TEST(PostgresSinkWriter, GivesUpAStatementAfterTheStatementTimeout) {
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("timeout");
  PostgresSinkOptions options;
  options.dsn = server->dsn();
  options.target_table = table;
  options.create_table = true;
  options.mode = SinkMode::kUpsert;
  options.statement_timeout_seconds = 0.5;
  auto writer = std::move(*MakePostgresSinkWriter(options));
  ASSERT_TRUE(writer->Open(ItemSchema(), {"id"}).ok());
  Exec(server->dsn(), "BEGIN; LOCK TABLE " + table);  // the checker holds the lock
  auto status = writer->Write(Changes(ItemSchema(), R"([
      {"id": 1, "name": "a", "price": 1.0, "_op": "insert", "_version": 1}])", 0, 1),
                              SinkMode::kUpsert);
  Exec(server->dsn(), "ROLLBACK");
  ASSERT_TRUE(status.IsIOError()) << status.ToString();  // transient: retried
  EXPECT_NE(status.message().find("57014"), std::string::npos) << status.ToString();
  writer->Abort();
  ASSERT_TRUE(writer->Write(Changes(ItemSchema(), R"([
      {"id": 1, "name": "a", "price": 1.0, "_op": "insert", "_version": 1}])", 0, 1),
                            SinkMode::kUpsert)
                  .ok());
  ASSERT_TRUE(writer->Commit({1}).ok());
}

// The child of KeepsWholeBatchesAndTheirProgressWhenTheWriterIsKilled (run as
// this binary with --gtest_also_run_disabled_tests and RILL_PG_KILL_DSN set):
// resume from the progress row, then write 200-row batches, one per version,
// until killed.
TEST(PostgresSinkWriterKillChild, DISABLED_WritesBatchesUntilKilled) {
  const char* dsn = std::getenv("RILL_PG_KILL_DSN");
  const char* table = std::getenv("RILL_PG_KILL_TABLE");
  if (dsn == nullptr || table == nullptr) GTEST_SKIP() << "run by the kill test";
  auto writer = MakeWriter(dsn, table, SinkMode::kAppend);
  ASSERT_TRUE(writer->Open(ItemSchema(), {}).ok());
  auto progress = writer->LoadProgress();
  ASSERT_TRUE(progress.ok());
  uint64_t version = progress->has_value() ? (*progress)->version : 0;
  for (int i = 0; i < 100000; ++i) {
    ++version;
    std::string json = "[";
    for (int row = 0; row < 200; ++row) {
      json += std::string(row > 0 ? "," : "") + "{\"id\": " +
              std::to_string(version * 1000 + row) + ", \"name\": \"v\", \"price\": " +
              std::to_string(version) + ", \"_op\": \"insert\", \"_version\": " +
              std::to_string(version) + "}";
    }
    ASSERT_TRUE(writer->Write(Changes(ItemSchema(), json + "]", version - 1, version),
                              SinkMode::kAppend)
                    .ok());
    ASSERT_TRUE(writer->Commit({version}).ok());
  }
}

TEST(PostgresSinkWriter, KeepsWholeBatchesAndTheirProgressWhenTheWriterIsKilled) {
  // 10 SIGKILLs of a child writing batch after batch (append mode: a batch
  // written twice would show): after each, the target holds exactly the
  // batches of versions 1..progress, each whole, and the next child resumes.
  RILL_REQUIRE_PG(server);
  std::string table = FreshTable("killed");
  std::string dsn = server->dsn();
  {
    auto setup = MakeWriter(dsn, table, SinkMode::kAppend);  // the tables exist
    ASSERT_TRUE(setup->Open(ItemSchema(), {}).ok());
  }
  std::mt19937 rng(24);
  uint64_t last_progress = 0;
  for (int trial = 0; trial < 10; ++trial) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("RILL_PG_KILL_DSN", dsn.c_str(), 1);
      setenv("RILL_PG_KILL_TABLE", table.c_str(), 1);
      int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      execl("/proc/self/exe", "postgres_sink_test", "--gtest_also_run_disabled_tests",
            "--gtest_filter=PostgresSinkWriterKillChild.*", static_cast<char*>(nullptr));
      _exit(127);
    }
    // Let it get through a few batches (or not even connect), then kill it.
    usleep(static_cast<useconds_t>(50000 + rng() % 600000));
    kill(pid, SIGKILL);
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "the child ended before the kill: " << wstatus;
    auto progress = Rows(dsn, "SELECT version FROM rill_sink_progress WHERE sink = '" +
                                  table + "'");
    uint64_t committed = progress.empty() ? 0 : std::stoull(progress[0]);
    EXPECT_GE(committed, last_progress);
    last_progress = committed;
    if (committed == 0) continue;  // killed before its first commit
    EXPECT_EQ(Rows(dsn, "SELECT count(*), count(DISTINCT id), count(DISTINCT price), "
                        "min(price), max(price) FROM " + table),
              (std::vector<std::string>{std::to_string(committed * 200) + "|" +
                                        std::to_string(committed * 200) + "|" +
                                        std::to_string(committed) + "|1|" +
                                        std::to_string(committed)}))
        << "trial " << trial;
  }
  EXPECT_GT(last_progress, 0u) << "no child committed a batch before its kill";
  RecordProperty("committed_versions", static_cast<int>(last_progress));
}

TEST(PostgresSinkWriter, RefusesAnEmptyDsnOrTargetNamingTheOption) {
  PostgresSinkOptions options;
  options.target_table = "t";
  auto writer = MakePostgresSinkWriter(options);
  ASSERT_TRUE(writer.status().IsInvalid());
  EXPECT_NE(writer.status().message().find("dsn"), std::string::npos);
  options.dsn = "host=127.0.0.1";
  options.target_table = "";
  writer = MakePostgresSinkWriter(options);
  ASSERT_TRUE(writer.status().IsInvalid());
  EXPECT_NE(writer.status().message().find("target_table"), std::string::npos);
}

}  // namespace
}  // namespace rill
