// NDJSON decoding into Arrow: Rill's JsonDecoder (simdjson On-Demand into Arrow
// builders) against Arrow C++'s JSON reader and DuckDB's read_json, on the same
// bytes, one core each, repetitions interleaved; and against the physical
// reference: simdjson alone walking the same bytes with iterate_many, reading
// every value of every document (nested ones too) and producing nothing.
//
//   ndjson_bench [--mb 100] [--reps 5] [--push-mb 4] [--seed 5]
//
// The input: realistic events of 16 fields (ids, ISO timestamps, strings with
// a few escapes, floats, ints, booleans, nulls, a list and a nested object),
// decoded by the same explicit schema everywhere. Rill decodes it in pushes of
// --push-mb (as JSONStreamConnector.push_bytes would); Arrow's reader gets the
// whole buffer (use_threads=false); DuckDB reads the same bytes from a file in
// the page cache (threads=1) into a temporary table. Rates are by wall time
// (value, baseline_value, ratio) and, as cpu_time_*, by the process's CPU
// time, which a loaded machine disturbs less.
#include <cstdio>
#include <ctime>
#include <fstream>
#include <random>

#include <arrow/io/memory.h>
#include <arrow/json/api.h>
#include <simdjson.h>

#include "bench_util.h"
#include "rill/connector/json_decoder.h"

namespace rill::bench {
namespace {

std::shared_ptr<arrow::Schema> EventSchema() {
  return arrow::schema({
      arrow::field("event_id", arrow::int64()),
      arrow::field("ts", arrow::timestamp(arrow::TimeUnit::MILLI)),
      arrow::field("user_id", arrow::utf8()),
      arrow::field("session", arrow::utf8()),
      arrow::field("event_type", arrow::utf8()),
      arrow::field("page", arrow::utf8()),
      arrow::field("price", arrow::float64()),
      arrow::field("quantity", arrow::int64()),
      arrow::field("discount", arrow::float64()),
      arrow::field("is_mobile", arrow::boolean()),
      arrow::field("country", arrow::utf8()),
      arrow::field("latency_ms", arrow::int64()),
      arrow::field("score", arrow::float64()),
      arrow::field("referrer", arrow::utf8()),
      arrow::field("tags", arrow::list(arrow::utf8())),
      arrow::field("device", arrow::struct_({arrow::field("os", arrow::utf8()),
                                             arrow::field("version", arrow::int64())})),
  });
}

std::string MakeEvents(int64_t target_bytes, uint64_t seed, int64_t* rows) {
  std::mt19937_64 rng(seed);
  const char* types[] = {"view", "click", "add_to_cart", "purchase", "search"};
  const char* countries[] = {"US", "DE", "FR", "JP", "BR", "IN", "GB", "NG"};
  const char* pages[] = {"/home", "/product/123", "/search?q=shoes", "/cart", "/checkout/step-2"};
  const char* oses[] = {"ios", "android", "windows", "macos", "linux"};
  std::string out;
  out.reserve(static_cast<size_t>(target_bytes) + 4096);
  char buf[1024];
  int64_t n = 0;
  while (static_cast<int64_t>(out.size()) < target_bytes) {
    int64_t ms = 1700000000000 + n * 7 + static_cast<int64_t>(rng() % 1000);
    time_t secs = static_cast<time_t>(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char ts[40];
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    bool has_discount = rng() % 4 == 0;
    char discount[32];
    if (has_discount) {
      snprintf(discount, sizeof(discount), "%.2f", (rng() % 50) / 100.0);
    } else {
      snprintf(discount, sizeof(discount), "null");
    }
    int len = snprintf(
        buf, sizeof(buf),
        "{\"event_id\":%lld,\"ts\":\"%s.%03dZ\",\"user_id\":\"u-%06llu\","
        "\"session\":\"%016llx\",\"event_type\":\"%s\",\"page\":\"%s\",\"price\":%.2f,"
        "\"quantity\":%llu,\"discount\":%s,\"is_mobile\":%s,\"country\":\"%s\","
        "\"latency_ms\":%llu,\"score\":%.6f,\"referrer\":\"%s\",\"tags\":[\"%s\",\"t%llu\"],"
        "\"device\":{\"os\":\"%s\",\"version\":%llu}}\n",
        static_cast<long long>(n), ts, static_cast<int>(ms % 1000),
        static_cast<unsigned long long>(rng() % 1000000), static_cast<unsigned long long>(rng()),
        types[rng() % 5], pages[rng() % 5], (rng() % 100000) / 100.0,
        static_cast<unsigned long long>(rng() % 10 + 1), discount,
        rng() % 2 ? "true" : "false", countries[rng() % 8],
        static_cast<unsigned long long>(rng() % 2000), (rng() % 1000000) / 1e6,
        rng() % 3 ? "https:\\/\\/example.com\\/a?b=\\\"c\\\"" : "", types[rng() % 5],
        static_cast<unsigned long long>(rng() % 100), oses[rng() % 5],
        static_cast<unsigned long long>(rng() % 20));
    out.append(buf, static_cast<size_t>(len));
    ++n;
  }
  *rows = n;
  return out;
}

int64_t RillDecode(const std::string& data, int64_t push_bytes) {
  JsonDecodeOptions options;
  options.schema = EventSchema();
  auto decoder = Check(JsonDecoder::Make(options), "decoder");
  int64_t rows = 0;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t end = std::min(data.size(), pos + static_cast<size_t>(push_bytes));
    end = data.find('\n', end);  // pushes end at a line end
    end = end == std::string::npos ? data.size() : end + 1;
    auto r = Check(decoder->Decode(std::string_view(data).substr(pos, end - pos)), "decode");
    if (!r.rejects.empty()) {
      std::fprintf(stderr, "unexpected reject: %s\n", r.rejects[0].error.c_str());
      std::exit(1);
    }
    rows += r.batch ? r.batch->num_rows() : 0;
    pos = end;
  }
  return rows;
}

int64_t ArrowDecode(const std::shared_ptr<arrow::Buffer>& buffer) {
  auto read = arrow::json::ReadOptions::Defaults();
  read.use_threads = false;
  read.block_size = 4 << 20;
  auto parse = arrow::json::ParseOptions::Defaults();
  parse.explicit_schema = EventSchema();
  parse.unexpected_field_behavior = arrow::json::UnexpectedFieldBehavior::Ignore;
  auto input = std::make_shared<arrow::io::BufferReader>(buffer);
  auto reader = Check(
      arrow::json::TableReader::Make(arrow::default_memory_pool(), input, read, parse), "reader");
  auto table = Check(reader->Read(), "arrow read_json");
  return table->num_rows();
}

namespace ondemand = simdjson::ondemand;

/// CPU time of the whole process (every thread), in seconds.
double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// Read `value` fully by its type (strings unescaped, numbers converted),
/// recursing into objects and arrays; folds what it read into `*sum`.
simdjson::error_code Walk(ondemand::value value, uint64_t* sum) {
  ondemand::json_type type;
  if (auto err = value.type().get(type)) return err;
  switch (type) {
    case ondemand::json_type::object: {
      ondemand::object obj;
      if (auto err = value.get_object().get(obj)) return err;
      for (auto field_result : obj) {
        ondemand::field field;
        if (auto err = std::move(field_result).get(field)) return err;
        *sum += field.key().raw()[0];
        if (auto err = Walk(field.value(), sum)) return err;
      }
      return simdjson::SUCCESS;
    }
    case ondemand::json_type::array: {
      ondemand::array arr;
      if (auto err = value.get_array().get(arr)) return err;
      for (auto item : arr) {
        ondemand::value v;
        if (auto err = item.get(v)) return err;
        if (auto err = Walk(v, sum)) return err;
      }
      return simdjson::SUCCESS;
    }
    case ondemand::json_type::string: {
      std::string_view s;
      if (auto err = value.get_string().get(s)) return err;
      *sum += s.size();
      return simdjson::SUCCESS;
    }
    case ondemand::json_type::number: {
      ondemand::number n;
      if (auto err = value.get_number().get(n)) return err;
      *sum += n.is_double() ? static_cast<uint64_t>(n.get_double()) : n.get_uint64();
      return simdjson::SUCCESS;
    }
    case ondemand::json_type::boolean: {
      bool b = false;
      if (auto err = value.get_bool().get(b)) return err;
      *sum += b;
      return simdjson::SUCCESS;
    }
    case ondemand::json_type::null: {
      bool is_null = false;
      if (auto err = value.is_null().get(is_null)) return err;
      *sum += is_null;
      return simdjson::SUCCESS;
    }
  }
  return simdjson::INCORRECT_TYPE;
}

/// The physical reference: simdjson's document stream over all the bytes
/// (single-threaded), every value of every document read; no output.
int64_t SimdjsonWalk(ondemand::parser* parser, const simdjson::padded_string& data,
                     uint64_t* sum) {
#ifdef SIMDJSON_THREADS_ENABLED
  parser->threaded = false;  // stage 1 of the next batch on the same thread
#endif
  ondemand::document_stream stream;
  if (parser->iterate_many(data, 1 << 20).get(stream)) {
    std::fprintf(stderr, "simdjson reference: iterate_many failed\n");
    std::exit(1);
  }
  int64_t docs = 0;
  for (auto doc_result : stream) {
    ondemand::document_reference doc;
    ondemand::object obj;
    simdjson::error_code err = std::move(doc_result).get(doc);
    if (!err) err = doc.get_object().get(obj);
    for (auto field_result : obj) {
      if (err) break;
      ondemand::field field;
      if (!(err = std::move(field_result).get(field))) {
        *sum += field.key().raw()[0];
        err = Walk(field.value(), sum);
      }
    }
    if (err) {
      std::fprintf(stderr, "simdjson reference: %s\n", simdjson::error_message(err));
      std::exit(1);
    }
    ++docs;
  }
  return docs;
}

const char* kDuckColumns =
    "{'event_id':'BIGINT','ts':'TIMESTAMP','user_id':'VARCHAR','session':'VARCHAR',"
    "'event_type':'VARCHAR','page':'VARCHAR','price':'DOUBLE','quantity':'BIGINT',"
    "'discount':'DOUBLE','is_mobile':'BOOLEAN','country':'VARCHAR','latency_ms':'BIGINT',"
    "'score':'DOUBLE','referrer':'VARCHAR','tags':'VARCHAR[]',"
    "'device':'STRUCT(os VARCHAR, version BIGINT)'}";

int Run(int64_t mb, int reps, int64_t push_mb, uint64_t seed, bool profile) {
  int64_t rows = 0;
  std::string data = MakeEvents(mb << 20, seed, &rows);
  if (profile) {  // only Rill's decoder, for perf
    for (int r = 0; r < reps; ++r) RillDecode(data, push_mb << 20);
    return 0;
  }
  const double total_mb = static_cast<double>(data.size()) / (1 << 20);
  Log("ndjson: %lld rows, %.1f MB", static_cast<long long>(rows), total_mb);
  auto buffer = arrow::Buffer::FromString(data);
  simdjson::padded_string padded(data);
  ondemand::parser reference_parser;
  uint64_t reference_sum = 0;

  std::string path = "/tmp/rill_ndjson_bench_" + std::to_string(getpid()) + ".ndjson";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
  }
  duckdb::DBConfig config;
  config.options.maximum_threads = 1;
  duckdb::DuckDB db(nullptr, &config);
  duckdb::Connection con(db);
  DuckRun(con, "SET threads = 1");
  std::string duck_sql = "CREATE OR REPLACE TEMP TABLE ev AS SELECT * FROM read_json('" + path +
                         "', format='newline_delimited', columns=" + kDuckColumns + ")";

  std::vector<double> ours, arrow_rates, duck_rates, reference_rates;
  // The same rates by the process's CPU time (all its threads): steadier than
  // wall time on a shared machine, where the wall clock also counts the time
  // other processes held the core.
  std::vector<double> ours_cpu, arrow_cpu, duck_cpu, reference_cpu;
  for (int r = 0; r < reps; ++r) {
    double c0 = CpuSeconds(), t0 = NowSeconds();
    int64_t n = RillDecode(data, push_mb << 20);
    double c1 = CpuSeconds(), t1 = NowSeconds();
    int64_t a = ArrowDecode(buffer);
    double c2 = CpuSeconds(), t2 = NowSeconds();
    DuckRun(con, duck_sql);
    double c3 = CpuSeconds(), t3 = NowSeconds();
    int64_t d = DuckScalar(con, "SELECT count(*) FROM ev");
    double c4 = CpuSeconds(), t4 = NowSeconds();
    int64_t s = SimdjsonWalk(&reference_parser, padded, &reference_sum);
    double c5 = CpuSeconds(), t5 = NowSeconds();
    if (n != rows || a != rows || d != rows || s != rows) {
      std::fprintf(stderr,
                   "row counts differ: rill %lld arrow %lld duckdb %lld simdjson %lld of %lld\n",
                   static_cast<long long>(n), static_cast<long long>(a),
                   static_cast<long long>(d), static_cast<long long>(s),
                   static_cast<long long>(rows));
      return 1;
    }
    ours.push_back(total_mb / (t1 - t0));
    arrow_rates.push_back(total_mb / (t2 - t1));
    duck_rates.push_back(total_mb / (t3 - t2));
    reference_rates.push_back(total_mb / (t5 - t4));
    ours_cpu.push_back(total_mb / (c1 - c0));
    arrow_cpu.push_back(total_mb / (c2 - c1));
    duck_cpu.push_back(total_mb / (c3 - c2));
    reference_cpu.push_back(total_mb / (c5 - c4));
  }
  std::remove(path.c_str());

  Measurement m;
  m.name = "ndjson_decode_mb_per_s";
  m.value = Median(ours);
  m.unit = "MB/s";
  m.baseline = "arrow_cpp_json_reader";
  m.baseline_value = Median(arrow_rates);
  m.ratio = m.value / *m.baseline_value;
  m.targets = {{"ratio", ">=", 3.0}};
  m.reps = reps;
  // Single thread against single thread: Rill decodes on the calling thread,
  // Arrow's reader runs with use_threads=false, DuckDB with threads=1.
  m.extra_numbers = {{"mb", total_mb}, {"rows", static_cast<double>(rows)},
                     {"duckdb_read_json_mb_per_s", Median(duck_rates)},
                     {"ratio_vs_duckdb", m.value / Median(duck_rates)},
                     {"threads_rill", 1}, {"threads_arrow", 1}, {"threads_duckdb", 1},
                     {"cpu_time_mb_per_s", Median(ours_cpu)},
                     {"cpu_time_baseline_mb_per_s", Median(arrow_cpu)},
                     {"cpu_time_ratio", Median(ours_cpu) / Median(arrow_cpu)}};
  Emit(m);
  Measurement duck = m;
  duck.name = "ndjson_decode_mb_per_s_vs_duckdb";
  duck.baseline = "duckdb_read_json";
  duck.baseline_value = Median(duck_rates);
  duck.ratio = duck.value / *duck.baseline_value;
  duck.targets = {{"ratio", ">=", 2.0}};
  duck.extra_numbers = {{"mb", total_mb}, {"rows", static_cast<double>(rows)},
                        {"threads_rill", 1}, {"threads_duckdb", 1},
                        {"cpu_time_mb_per_s", Median(ours_cpu)},
                        {"cpu_time_baseline_mb_per_s", Median(duck_cpu)},
                        {"cpu_time_ratio", Median(ours_cpu) / Median(duck_cpu)}};
  Emit(duck);
  Measurement reference;
  reference.name = "ndjson_simdjson_reference_mb_per_s";
  reference.value = Median(reference_rates);
  reference.unit = "MB/s";
  reference.reps = reps;
  reference.extra = {{"what", "simdjson On-Demand iterate_many (1 MiB batches, one thread) "
                              "reading every value of every document, no output"}};
  reference.extra_numbers = {{"mb", total_mb}, {"rows", static_cast<double>(rows)},
                             {"checksum", static_cast<double>(reference_sum % 1000000007)},
                             {"cpu_time_mb_per_s", Median(reference_cpu)}};
  Emit(reference);
  Measurement vs_reference = duck;
  vs_reference.name = "ndjson_decode_mb_per_s_vs_simdjson";
  vs_reference.baseline = "simdjson_iterate_many_walk";
  vs_reference.baseline_value = reference.value;
  vs_reference.ratio = vs_reference.value / reference.value;
  vs_reference.targets = {{"ratio", ">=", 0.3}};
  vs_reference.extra_numbers = {{"mb", total_mb}, {"rows", static_cast<double>(rows)},
                                {"threads_rill", 1}, {"threads_simdjson", 1},
                                {"cpu_time_mb_per_s", Median(ours_cpu)},
                                {"cpu_time_baseline_mb_per_s", Median(reference_cpu)},
                                {"cpu_time_ratio", Median(ours_cpu) / Median(reference_cpu)}};
  Emit(vs_reference);
  return 0;
}

}  // namespace
}  // namespace rill::bench

int main(int argc, char** argv) {
  rill::bench::Args args(argc, argv);
  if (args.Flag("help")) {
    std::puts("ndjson_bench [--mb 100] [--reps 5] [--push-mb 4] [--seed 5]");
    return 0;
  }
  return rill::bench::Run(args.Int("mb", 100), static_cast<int>(args.Int("reps", 5)),
                          args.Int("push-mb", 4), static_cast<uint64_t>(args.Int("seed", 5)),
                          args.Flag("profile-rill"));
}
