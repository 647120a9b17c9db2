#include "nexmark/queries.h"

#include <arrow/table.h>

#include "bench_util.h"
#include "rill/engine/stream_sql_task.h"
#include "rill/engine/window_task.h"

namespace rill::nexmark {
namespace {

RetentionPolicy Rows(int64_t n) {
  RetentionPolicy r;
  r.max_rows = n;
  return r;
}

Status AddStream(Pipeline& p, const PipelineOptions& o, const std::string& name,
                 const std::string& source, const std::string& sql) {
  RILL_ASSIGN_OR_RAISE(auto task, StreamSqlTask::Make(name, sql, p.engine.get(), source,
                                                      p.output_table, Rows(o.max_rows)));
  return p.engine->AddSqlTask(task);
}

Status AddWindow(Pipeline& p, const PipelineOptions& o, const std::string& name,
                 const std::string& source, const std::string& output, WindowKind kind,
                 double size, double slide, std::vector<std::string> group_by,
                 std::vector<std::pair<std::string, std::string>> aggs) {
  WindowTaskOptions w;
  w.name = name;
  w.source_table = source;
  w.output_table = output;
  w.spec.kind = kind;
  w.spec.time_column = "date_time";
  w.spec.size_seconds = size;
  w.spec.slide_seconds = slide;
  w.spec.group_by = std::move(group_by);
  w.spec.allowed_lateness_seconds = o.allowed_lateness_seconds;
  // At the end of the stream the watermark moves on with processing time.
  w.spec.idle_timeout_seconds = 1.0;
  for (auto& [out, expr] : aggs) {
    RILL_ASSIGN_OR_RAISE(auto agg, ParseWindowAggregation(out, expr));
    w.spec.aggregations.push_back(std::move(agg));
  }
  w.retention = Rows(o.max_rows);
  RILL_ASSIGN_OR_RAISE(auto task, WindowTask::Make(std::move(w)));
  return p.engine->AddWindowTask(task);
}

// The query's tasks. Tasks run in name order within a tick (a window task's
// output is written before the stream task named after it reads it).
Status AddQuery(Pipeline& p, const PipelineOptions& o) {
  switch (p.query) {
    case 0:
      return AddStream(p, o, "q0", "bid",
                       "SELECT auction, bidder, price, date_time, extra FROM bid");
    case 1:
      return AddStream(p, o, "q1", "bid",
                       "SELECT auction, bidder, CAST(0.908 * price AS DOUBLE) AS price, "
                       "date_time FROM bid");
    case 2:
      return AddStream(p, o, "q2", "bid", "SELECT auction, price FROM bid WHERE auction % 123 = 0");
    case 3: {
      // Each (auction, person) pair is produced by whichever of the two rows
      // arrived last: new auctions meet persons written up to the same tick,
      // new persons meet auctions written in earlier ticks.
      const std::string select =
          "SELECT p.name, p.city, p.state, a.id FROM auction a JOIN person p ON a.seller = p.id "
          "WHERE a.category = 10 AND p.state IN ('OR', 'ID', 'CA') AND ";
      RILL_RETURN_NOT_OK(AddStream(p, o, "q3_1_new_auctions", "auction",
                                   select + "p.z_update_ts <= a.z_update_ts"));
      return AddStream(p, o, "q3_2_new_persons", "person", select + "a.z_update_ts < p.z_update_ts");
    }
    case 4: {
      auto task = [&](const char* name, const std::string& sql,
                      const std::string& output) {
        return std::make_shared<ScheduledSqlTask>(
            name, sql, output, o.q4_interval_seconds, std::vector<std::string>{},
            /*use_prepared_statements=*/true, std::nullopt, o.q4_incremental);
      };
      if (!o.q4_split) {
        return p.engine->AddSqlTask(task("q4", ReferenceSql(4), p.output_table));
      }
      // Tasks run in name order: q4_max is written before q4_2_avg reads it.
      RILL_RETURN_NOT_OK(p.engine->AddSqlTask(
          task("q4_1_max",
               "SELECT a.id, a.category, max(b.price) AS final FROM auction a JOIN bid b "
               "ON a.id = b.auction AND b.date_time BETWEEN a.date_time AND a.expires "
               "GROUP BY a.id, a.category",
               "q4_max")));
      return p.engine->AddSqlTask(
          task("q4_2_avg",
               "SELECT category, avg(final) AS avg_price FROM q4_max GROUP BY category",
               p.output_table));
    }
    case 5:
      RILL_RETURN_NOT_OK(AddWindow(p, o, "q5_1_counts", "bid", "q5_counts", WindowKind::kHopping,
                                   10, 2, {"auction"}, {{"num", "count(*)"}}));
      // All windows ending together close in the same emission, so the new rows
      // hold every auction of each closed window.
      return AddStream(p, o, "q5_2_hottest", "q5_counts",
                       "SELECT window_start, window_end, auction, num FROM q5_counts "
                       "QUALIFY num = max(num) OVER (PARTITION BY window_start)");
    case 7:
      RILL_RETURN_NOT_OK(AddWindow(p, o, "q7_1_max", "bid", "q7_max", WindowKind::kTumbling, 10,
                                   0, {}, {{"maxprice", "max(price)"}}));
      return AddStream(p, o, "q7_2_bids", "q7_max",
                       "SELECT b.auction, b.price, b.bidder, b.date_time FROM q7_max m JOIN bid b "
                       "ON b.price = m.maxprice AND b.date_time >= m.window_start "
                       "AND b.date_time < m.window_end");
    case 8: {
      RILL_RETURN_NOT_OK(AddWindow(p, o, "q8_1_persons", "person", "q8_persons",
                                   WindowKind::kTumbling, 10, 0, {"id", "name"},
                                   {{"n", "count(*)"}}));
      RILL_RETURN_NOT_OK(AddWindow(p, o, "q8_2_sellers", "auction", "q8_sellers",
                                   WindowKind::kTumbling, 10, 0, {"seller"}, {{"n", "count(*)"}}));
      const std::string select =
          "SELECT p.id, p.name, p.window_start FROM q8_persons p JOIN q8_sellers a "
          "ON p.id = a.seller AND p.window_start = a.window_start WHERE ";
      RILL_RETURN_NOT_OK(AddStream(p, o, "q8_3_new_persons", "q8_persons",
                                   select + "a.z_update_ts <= p.z_update_ts"));
      return AddStream(p, o, "q8_4_new_sellers", "q8_sellers",
                       select + "p.z_update_ts < a.z_update_ts");
    }
    default:
      return Status::Invalid("Nexmark query q", p.query, " is not implemented");
  }
}

}  // namespace

Status Pipeline::Push(const EventBatch& batch) {
  if (batch.person->num_rows() > 0) RILL_RETURN_NOT_OK(person->Push(batch.person));
  if (batch.auction->num_rows() > 0) RILL_RETURN_NOT_OK(auction->Push(batch.auction));
  if (batch.bid->num_rows() > 0) RILL_RETURN_NOT_OK(bid->Push(batch.bid));
  return Status::OK();
}

Status Pipeline::Tick() {
  clock->store(clock->load() + tick_seconds);
  return engine->Step().status();
}

Status Pipeline::Finish() {
  RILL_RETURN_NOT_OK(Tick());
  clock->store(clock->load() + 100000.0);
  for (int i = 0; i < 3; ++i) RILL_RETURN_NOT_OK(Tick());
  return Status::OK();
}

Result<double> Pipeline::Run(const std::vector<EventBatch>& events) {
  const double t0 = bench::NowSeconds();
  for (const auto& e : events) {
    RILL_RETURN_NOT_OK(Push(e));
    RILL_RETURN_NOT_OK(Tick());
  }
  RILL_RETURN_NOT_OK(Finish());
  return bench::NowSeconds() - t0;
}

Result<Pipeline> MakePipeline(int q, const PipelineOptions& options) {
  Pipeline p;
  p.query = q;
  p.tick_seconds = options.tick_seconds;
  p.output_table = "q" + std::to_string(q) + "_out";
  p.clock = std::make_shared<std::atomic<double>>(1.0e9);
  EngineOptions eo;
  eo.trigger_interval_ms = std::max<int64_t>(1, static_cast<int64_t>(options.tick_seconds * 1000));
  auto clock = p.clock;
  eo.clock = [clock] { return clock->load(); };
  eo.log_repeat_window_seconds = 0;
  eo.sql_threads = 1;  // one core: the tick thread runs DuckDB's work too
  RILL_ASSIGN_OR_RAISE(p.engine, Engine::Make(std::move(eo)));
  BufferLimits limits;
  if (options.buffer_records > 0) limits.max_records = options.buffer_records;
  const std::pair<const char*, std::shared_ptr<arrow::Schema>> inputs[] = {
      {"person", PersonSchema()}, {"auction", AuctionSchema()}, {"bid", BidSchema()}};
  for (const auto& [name, schema] : inputs) {
    TableOptions t;
    t.mode = TableMode::kAppend;
    t.retention = Rows(options.max_rows);
    RILL_RETURN_NOT_OK(p.engine->RegisterTable(name, schema, t).status());
    auto conn = std::make_shared<MemoryConnector>(name, schema, limits, std::string(name) + "_in");
    RILL_RETURN_NOT_OK(p.engine->AddConnector(conn));
    (name[0] == 'p' ? p.person : name[0] == 'a' ? p.auction : p.bid) = conn;
  }
  RILL_RETURN_NOT_OK(AddQuery(p, options));
  return p;
}

std::string ReferenceSql(int q) {
  switch (q) {
    case 0:
      return "SELECT auction, bidder, price, epoch_ms(date_time) AS t, extra FROM bid";
    case 1:
      return "SELECT auction, bidder, CAST(0.908 * price AS DOUBLE) AS price, "
             "epoch_ms(date_time) AS t FROM bid";
    case 2:
      return "SELECT auction, price FROM bid WHERE auction % 123 = 0";
    case 3:
      return "SELECT p.name, p.city, p.state, a.id FROM auction a JOIN person p "
             "ON a.seller = p.id WHERE a.category = 10 AND p.state IN ('OR', 'ID', 'CA')";
    case 4:
      return "SELECT q.category, avg(q.final) AS avg_price FROM (SELECT a.id, a.category, "
             "max(b.price) AS final FROM auction a JOIN bid b ON a.id = b.auction "
             "AND b.date_time BETWEEN a.date_time AND a.expires GROUP BY a.id, a.category) q "
             "GROUP BY q.category";
    case 5:
      return "WITH w AS (SELECT ws, auction, count(*) AS num FROM (SELECT auction, "
             "unnest(range(epoch_ms(date_time) // 2000 * 2000 - 8000, "
             "epoch_ms(date_time) // 2000 * 2000 + 1, 2000)) AS ws FROM bid) GROUP BY ALL) "
             "SELECT ws, auction, num FROM w QUALIFY num = max(num) OVER (PARTITION BY ws)";
    case 7:
      return "WITH m AS (SELECT epoch_ms(date_time) // 10000 AS w, max(price) AS maxprice "
             "FROM bid GROUP BY w) SELECT b.auction, b.price, b.bidder, "
             "epoch_ms(b.date_time) AS t FROM bid b JOIN m "
             "ON epoch_ms(b.date_time) // 10000 = m.w AND b.price = m.maxprice";
    case 8:
      return "SELECT DISTINCT p.id, p.name, epoch_ms(p.date_time) // 10000 * 10000 AS ws "
             "FROM person p JOIN auction a ON p.id = a.seller "
             "AND epoch_ms(p.date_time) // 10000 = epoch_ms(a.date_time) // 10000";
    default:
      return "";
  }
}

std::string ResultSql(int q) {
  switch (q) {
    case 0:
      return "SELECT auction, bidder, price, epoch_ms(date_time) AS t, extra FROM out";
    case 1:
      return "SELECT auction, bidder, price, epoch_ms(date_time) AS t FROM out";
    case 2:
      return "SELECT auction, price FROM out";
    case 3:
      return "SELECT name, city, state, id FROM out";
    case 4:
      return "SELECT category, avg_price FROM out";
    case 5:
      return "SELECT epoch_ms(window_start) AS ws, auction, num FROM out";
    case 7:
      return "SELECT auction, price, bidder, epoch_ms(date_time) AS t FROM out";
    case 8:
      return "SELECT id, name, epoch_ms(window_start) AS ws FROM out";
    default:
      return "";
  }
}

Result<CheckResult> CheckAgainstDuckDb(Pipeline& p, const std::vector<EventBatch>& events) {
  CheckResult r;
  std::shared_ptr<arrow::Table> out;
  auto table = p.engine->GetTable(p.output_table);
  if (table.ok()) {
    RILL_ASSIGN_OR_RAISE(out, p.engine->Query("SELECT * EXCLUDE (z_insert_ts, z_update_ts) FROM " +
                                              p.output_table));
  }
  duckdb::DuckDB db(nullptr);
  duckdb::Connection con(db);
  bench::DuckRun(con, "SET threads TO 1");
  std::vector<std::shared_ptr<arrow::RecordBatch>> persons, auctions, bids;
  for (const auto& e : events) {
    persons.push_back(e.person);
    auctions.push_back(e.auction);
    bids.push_back(e.bid);
  }
  bench::DuckArrowSource ps(PersonSchema()), as(AuctionSchema()), bs(BidSchema());
  ps.Set(persons);
  as.Set(auctions);
  bs.Set(bids);
  ps.CreateView(con, "person");
  as.CreateView(con, "auction");
  bs.CreateView(con, "bid");
  // q4's averages are compared to 6 decimals (summation order differs).
  const std::string round = p.query == 4 ? "SELECT category, round(avg_price, 6) FROM " : "";
  std::string rill_sql;
  std::unique_ptr<bench::DuckArrowSource> os;
  if (out) {
    os = std::make_unique<bench::DuckArrowSource>(out->schema());
    RILL_ASSIGN_OR_RAISE(auto batches, arrow::TableBatchReader(*out).ToRecordBatches());
    os->Set(batches);
    os->CreateView(con, "out");
    rill_sql = ResultSql(p.query);
  } else {
    rill_sql = "SELECT * FROM (" + ReferenceSql(p.query) + ") WHERE false";
  }
  const std::string ref = p.query == 4 ? round + "(" + ReferenceSql(4) + ")" : ReferenceSql(p.query);
  const std::string mine = p.query == 4 ? round + "(" + rill_sql + ")" : rill_sql;
  auto result = con.Query(
      "SELECT (SELECT count(*) FROM (" + ref + ")), (SELECT count(*) FROM (" + mine +
      ")), (SELECT count(*) FROM ((" + ref + ") EXCEPT ALL (" + mine +
      "))), (SELECT count(*) FROM ((" + mine + ") EXCEPT ALL (" + ref + ")))");
  if (result->HasError()) return Status::Invalid("DuckDB check: ", result->GetError());
  r.reference_rows = result->GetValue(0, 0).GetValue<int64_t>();
  r.rill_rows = result->GetValue(1, 0).GetValue<int64_t>();
  r.missing = result->GetValue(2, 0).GetValue<int64_t>();
  r.extra = result->GetValue(3, 0).GetValue<int64_t>();
  return r;
}

}  // namespace rill::nexmark
