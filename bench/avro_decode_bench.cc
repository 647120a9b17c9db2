// Avro binary decoding: Rill's AvroDecoder (straight into Arrow buffers)
// against the Avro C library's generic reader (Debian libavro-dev:
// avro_value_read into a generic value) and fastavro (Python,
// schemaless_reader), on the same bytes, one core each, repetitions interleaved.
//
//   avro_decode_bench [--records 200k] [--reps 5] [--seed 7] [--python .venv/bin/python]
//
// The input: --records events of a realistic schema (14 fields: longs, a
// timestamp-millis, strings, an enum, doubles, an int, a nullable double, a
// boolean, an array of strings, a map of longs, a nested record), Avro binary
// records one after another (as Kafka message bodies are, without their 5-byte
// Confluent headers), written by a small encoder below. Each decoder reads all
// of them from one buffer: Rill into Arrow record batches of 10k rows (the work
// a connector does), the C library into one reused generic value per record
// (no columnar output at all), fastavro into one Python dict per record.
// MB/s = input bytes / seconds; ratio = the median of the repetitions' own ratios
// (each pair runs back to back). fastavro runs in a child Python process (skipped,
// with a note on stderr, when it cannot be imported).
#include <avro.h>

#include <cstdio>
#include <fstream>
#include <random>

#include <arrow/record_batch.h>

#include "bench_util.h"
#include "rill/connector/avro_decoder.h"

namespace rill::bench {
namespace {

const char* kSchema = R"({"type":"record","name":"Event","namespace":"bench","fields":[
  {"name":"event_id","type":"long"},
  {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"user_id","type":"string"},
  {"name":"page","type":"string"},
  {"name":"event_type","type":{"type":"enum","name":"Kind","symbols":["view","click","buy","cart"]}},
  {"name":"price","type":"double"},
  {"name":"quantity","type":"int"},
  {"name":"discount","type":["null","double"]},
  {"name":"is_mobile","type":"boolean"},
  {"name":"country","type":"string"},
  {"name":"score","type":"double"},
  {"name":"tags","type":{"type":"array","items":"string"}},
  {"name":"attrs","type":{"type":"map","values":"long"}},
  {"name":"geo","type":{"type":"record","name":"Geo","fields":[
     {"name":"lat","type":"double"},{"name":"lon","type":"double"},{"name":"city","type":"string"}]}}
]})";

struct Writer {
  std::string out;
  void Long(int64_t v) {
    uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
    while (z >= 0x80) {
      out.push_back(static_cast<char>((z & 0x7f) | 0x80));
      z >>= 7;
    }
    out.push_back(static_cast<char>(z));
  }
  void Str(std::string_view s) {
    Long(static_cast<int64_t>(s.size()));
    out.append(s);
  }
  void Double(double d) { out.append(reinterpret_cast<const char*>(&d), 8); }
};

std::string MakeRecords(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const char* pages[] = {"/", "/home", "/product/12345", "/cart", "/checkout/confirm",
                         "/search?q=blue+shoes"};
  const char* countries[] = {"US", "DE", "FR", "BR", "IN", "JP", "NO"};
  const char* cities[] = {"Oslo", "São Paulo", "München", "Tōkyō", "New York"};
  const char* tags[] = {"promo", "new", "returning", "mobile-app", "ab-test-7"};
  Writer w;
  for (int64_t i = 0; i < n; ++i) {
    w.Long(1000000 + i);
    w.Long(1700000000000 + static_cast<int64_t>(rng() % 86400000));
    w.Str("user-" + std::to_string(rng() % 100000));
    w.Str(pages[rng() % 6]);
    w.Long(static_cast<int64_t>(rng() % 4));
    w.Double(static_cast<double>(rng() % 100000) / 100);
    w.Long(static_cast<int64_t>(rng() % 10) + 1);
    if (rng() % 3 == 0) {
      w.Long(0);
    } else {
      w.Long(1);
      w.Double(static_cast<double>(rng() % 50) / 100);
    }
    w.out.push_back(static_cast<char>(rng() % 2));
    w.Str(countries[rng() % 7]);
    w.Double(static_cast<double>(rng() % 1000000) / 1e6);
    const int ntags = static_cast<int>(rng() % 4);
    if (ntags > 0) {
      w.Long(ntags);
      for (int t = 0; t < ntags; ++t) w.Str(tags[rng() % 5]);
    }
    w.Long(0);
    const int nattrs = static_cast<int>(rng() % 3);
    if (nattrs > 0) {
      w.Long(nattrs);
      for (int a = 0; a < nattrs; ++a) {
        w.Str("k" + std::to_string(a));
        w.Long(static_cast<int64_t>(rng() % 1000));
      }
    }
    w.Long(0);
    w.Double(-90 + static_cast<double>(rng() % 18000) / 100);
    w.Double(-180 + static_cast<double>(rng() % 36000) / 100);
    w.Str(cities[rng() % 5]);
  }
  return w.out;
}

/// Seconds for Rill to decode `n` records of `data` into 10k-row batches.
double RunRill(const std::shared_ptr<const AvroSchema>& writer, const std::string& data,
               int64_t n, int64_t* rows_out) {
  AvroDecodeOptions options;
  auto decoder = Check(AvroDecoder::Make(options), "AvroDecoder::Make");
  const double t0 = NowSeconds();
  int64_t at = 0, rows = 0;
  std::string_view all(data);
  for (int64_t i = 0; i < n; ++i) {
    int64_t used = 0;
    Status st = decoder->Append(writer, all.substr(static_cast<size_t>(at)), at, &used);
    if (!st.ok()) Die("Rill: " + st.ToString());
    at += used;
    if (decoder->num_rows() == 10000) rows += Check(decoder->Flush(), "Flush")->num_rows();
  }
  if (auto last = Check(decoder->Flush(), "Flush")) rows += last->num_rows();
  const double t = NowSeconds() - t0;
  *rows_out = rows;
  return t;
}

/// Seconds for the Avro C library to read `n` records of `data` into a generic value.
double RunAvroC(const std::string& data, int64_t n) {
  avro_schema_t schema;
  if (avro_schema_from_json_length(kSchema, std::strlen(kSchema), &schema)) {
    Die(std::string("avro_schema_from_json: ") + avro_strerror());
  }
  avro_value_iface_t* iface = avro_generic_class_from_schema(schema);
  avro_value_t value;
  avro_generic_value_new(iface, &value);
  const double t0 = NowSeconds();
  avro_reader_t reader = avro_reader_memory(data.data(), static_cast<int64_t>(data.size()));
  for (int64_t i = 0; i < n; ++i) {
    if (avro_value_read(reader, &value)) Die(std::string("avro_value_read: ") + avro_strerror());
  }
  const double t = NowSeconds() - t0;
  avro_reader_free(reader);
  avro_value_decref(&value);
  avro_value_iface_decref(iface);
  avro_schema_decref(schema);
  return t;
}

/// Seconds for fastavro to read the records (a child Python process); NaN
/// when Python or fastavro is missing.
double RunFastavro(const std::string& python, const std::string& path, int64_t n) {
  const std::string script =
      "import io, json, sys, time\n"
      "try:\n"
      "    import fastavro\n"
      "except ImportError as e:\n"
      "    print('nan'); sys.exit(0)\n"
      "schema = fastavro.parse_schema(json.loads(sys.argv[1]))\n"
      "data = open(sys.argv[2], 'rb').read()\n"
      "n = int(sys.argv[3])\n"
      "buf = io.BytesIO(data)\n"
      "read = fastavro.schemaless_reader\n"
      "t0 = time.perf_counter()\n"
      "for _ in range(n):\n"
      "    read(buf, schema)\n"
      "t = time.perf_counter() - t0\n"
      "assert buf.tell() == len(data)\n"
      "print(t)\n";
  const std::string script_path = path + ".py";
  std::ofstream(script_path) << script;
  std::string schema_arg;
  for (char c : std::string(kSchema)) {
    if (c == '\'') Die("schema with a quote");
    schema_arg += c == '\n' ? ' ' : c;
  }
  const std::string cmd = python + " " + script_path + " '" + schema_arg + "' " + path + " " +
                          std::to_string(n);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return std::nan("");
  char line[128] = {0};
  const bool got = std::fgets(line, sizeof(line), p) != nullptr;
  pclose(p);
  return got ? std::strtod(line, nullptr) : std::nan("");
}

}  // namespace
}  // namespace rill::bench

int main(int argc, char** argv) {
  using namespace rill::bench;
  Args args(argc, argv);
  const int64_t n = args.Int("records", 200000);
  const int reps = static_cast<int>(args.Int("reps", 5));
  const uint64_t seed = static_cast<uint64_t>(args.Int("seed", 7));
  const std::string python = args.Str("python", ".venv/bin/python");
  const std::string data = MakeRecords(n, seed);
  const double mb = static_cast<double>(data.size()) / 1e6;
  auto writer = Check(rill::AvroSchema::Parse(kSchema), "AvroSchema::Parse");
  const std::string path = "/tmp/rill_avro_bench_" + std::to_string(getpid()) + ".bin";
  std::ofstream(path, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
  std::fprintf(stderr, "avro_decode_bench: %lld records, %.1f MB\n", static_cast<long long>(n), mb);

  std::vector<double> rill_rates, c_rates, py_rates, ratios, py_ratios;
  for (int r = 0; r < reps; ++r) {
    int64_t rows = 0;
    // Alternate who goes first.
    double t_rill = 0, t_c = 0;
    if (args.Str("only", "") == "rill") {  // for profiling
      t_rill = RunRill(writer, data, n, &rows);
      t_c = t_rill;
    } else if (r % 2 == 0) {
      t_rill = RunRill(writer, data, n, &rows);
      t_c = RunAvroC(data, n);
    } else {
      t_c = RunAvroC(data, n);
      t_rill = RunRill(writer, data, n, &rows);
    }
    if (rows != n) Die("Rill decoded " + std::to_string(rows) + " rows");
    rill_rates.push_back(mb / t_rill);
    c_rates.push_back(mb / t_c);
    ratios.push_back(t_c / t_rill);
    const double t_py = args.Str("only", "").empty() ? RunFastavro(python, path, n) : std::nan("");
    if (!std::isnan(t_py)) {
      py_rates.push_back(mb / t_py);
      py_ratios.push_back(t_py / t_rill);
    }
    std::fprintf(stderr, "  rep %d: rill %.1f MB/s, avro-c %.1f MB/s, fastavro %.1f MB/s\n", r,
                 rill_rates.back(), c_rates.back(), std::isnan(t_py) ? 0.0 : mb / t_py);
  }
  std::remove(path.c_str());
  std::remove((path + ".py").c_str());

  const double rill = Median(rill_rates);
  Measurement m;
  m.name = "avro_decode_mb_per_s";
  m.value = rill;
  m.unit = "MB/s";
  m.baseline = "avro_c_generic_reader";
  m.baseline_value = Median(c_rates);
  // The ratio is the median of the repetitions' own ratios (each pair ran back
  // to back, so load on the shared machine hits both alike); the ratio of the
  // two medians is printed beside it.
  m.ratio = Median(ratios);
  m.targets.push_back({"ratio", ">=", 3.0});
  m.extra_numbers.push_back({"ratio_of_medians", rill / *m.baseline_value});
  m.reps = reps;
  m.extra_numbers.push_back({"input_mb", mb});
  m.extra_numbers.push_back({"records", static_cast<double>(n)});
  Emit(m);
  if (!py_rates.empty()) {
    Measurement f;
    f.name = "avro_decode_mb_per_s_vs_fastavro";
    f.value = rill;
    f.unit = "MB/s";
    f.baseline = "fastavro_schemaless_reader";
    f.baseline_value = Median(py_rates);
    f.ratio = Median(py_ratios);
    f.extra_numbers.push_back({"ratio_of_medians", rill / *f.baseline_value});
    f.reps = static_cast<int>(py_rates.size());
    f.extra_numbers.push_back({"input_mb", mb});
    Emit(f);
  } else {
    std::fprintf(stderr, "avro_decode_bench: fastavro not importable by %s; no fastavro figure\n",
                 python.c_str());
  }
  return 0;
}
