// libFuzzer target: batch reconciliation and the write path of LiveTable.
//
// The input picks a table (1-4 columns of random types and nullability, a key
// or not, snapshot or append mode, retention by rows and/or age) and then up
// to four batches of random columns: each table column present or missing,
// of the table's type or another one (so reconciliation must cast or refuse),
// in random order, sometimes with an unknown or a duplicated column, with
// random values and nulls. Each batch goes through LiveTable::Reconcile and,
// when accepted, LiveTable::Write. The target aborts when:
//   - a refusal is not Invalid (reconciliation names what was wrong) or has
//     no message;
//   - an accepted batch does not have the table's user schema and row count;
//   - a write of an accepted batch fails, or the published version is not
//     valid Arrow, breaks max_rows, or holds a key twice in a keyed table.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/compute/api.h>
#include <fuzzer/FuzzedDataProvider.h>

#include "rill/table/live_table.h"

namespace {

#define FUZZ_CHECK(cond, what)                                                       \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "invariant failed: %s: %s (%s:%d)\n", #cond,              \
                   std::string(what).c_str(), __FILE__, __LINE__);                   \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

std::shared_ptr<arrow::DataType> PickType(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 12)) {
    case 0: return arrow::int8();
    case 1: return arrow::int16();
    case 2: return arrow::int32();
    case 3: return arrow::int64();
    case 4: return arrow::uint32();
    case 5: return arrow::float32();
    case 6: return arrow::float64();
    case 7: return arrow::boolean();
    case 8: return arrow::timestamp(arrow::TimeUnit::MILLI);
    case 9: return arrow::timestamp(arrow::TimeUnit::SECOND, "UTC");
    case 10: return arrow::date32();
    case 11: return arrow::dictionary(arrow::int32(), arrow::utf8());
    default: return arrow::utf8();
  }
}

/// Map random bytes to valid UTF-8 (a utf8 array holding anything else is an
/// invalid Arrow array, which producers must not hand over): ASCII letters,
/// digits and punctuation, and "é" for bytes above 0x7f.
std::string ValidUtf8(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x80) {
      out += "\xc3\xa9";
    } else {
      out += static_cast<char>(c < 0x20 || c == 0x7f ? 'a' + c % 26 : c);
    }
  }
  return out;
}

/// Random values of `type`: integers, floats and times are drawn as int64 or
/// double and cast unsafely (any bit pattern the type can hold); strings are
/// random bytes or numerals (so that string→number casts sometimes work).
std::shared_ptr<arrow::Array> RandomArray(FuzzedDataProvider& in,
                                          const std::shared_ptr<arrow::DataType>& type,
                                          int64_t rows) {
  const int null_percent = in.ConsumeIntegralInRange<int>(0, 100);
  auto is_null = [&] { return in.ConsumeIntegralInRange<int>(0, 99) < null_percent; };
  std::shared_ptr<arrow::Array> raw;
  if (type->id() == arrow::Type::STRING || type->id() == arrow::Type::DICTIONARY) {
    arrow::StringBuilder b;
    for (int64_t i = 0; i < rows; ++i) {
      if (is_null()) {
        (void)b.AppendNull();
      } else if (in.ConsumeBool()) {
        (void)b.Append(std::to_string(in.ConsumeIntegralInRange<int64_t>(-300, 300)));
      } else {
        (void)b.Append(ValidUtf8(in.ConsumeRandomLengthString(12)));
      }
    }
    raw = b.Finish().ValueOrDie();
    if (type->id() == arrow::Type::DICTIONARY) {
      return arrow::compute::DictionaryEncode(raw).ValueOrDie().make_array();
    }
    return raw;
  }
  if (type->id() == arrow::Type::BOOL) {
    arrow::BooleanBuilder b;
    for (int64_t i = 0; i < rows; ++i) {
      (void)(is_null() ? b.AppendNull() : b.Append(in.ConsumeBool()));
    }
    return b.Finish().ValueOrDie();
  }
  if (arrow::is_floating(type->id())) {
    arrow::DoubleBuilder b;
    for (int64_t i = 0; i < rows; ++i) {
      (void)(is_null() ? b.AppendNull() : b.Append(in.ConsumeFloatingPoint<double>()));
    }
    raw = b.Finish().ValueOrDie();
  } else {
    arrow::Int64Builder b;
    for (int64_t i = 0; i < rows; ++i) {
      (void)(is_null() ? b.AppendNull()
                       : b.Append(in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(-5, 5)
                                                   : in.ConsumeIntegral<int64_t>()));
    }
    raw = b.Finish().ValueOrDie();
  }
  if (type->id() == arrow::Type::DATE32 || type->id() == arrow::Type::TIMESTAMP) {
    // int64 → date32 has no cast kernel; go through int32 (dates) or view
    // the int64 values as the timestamp's unit.
    if (type->id() == arrow::Type::DATE32) {
      raw = arrow::compute::Cast(*raw, arrow::int32(), arrow::compute::CastOptions::Unsafe())
                .ValueOrDie();
    }
  }
  return arrow::compute::Cast(*raw, type, arrow::compute::CastOptions::Unsafe()).ValueOrDie();
}

std::shared_ptr<rill::LiveTable> MakeTable(FuzzedDataProvider& in, bool* keyed) {
  const int ncols = in.ConsumeIntegralInRange<int>(1, 4);
  arrow::FieldVector fields;
  for (int i = 0; i < ncols; ++i) {
    fields.push_back(arrow::field("c" + std::to_string(i), PickType(in), in.ConsumeBool()));
  }
  rill::TableOptions options;
  options.auto_compact_chunks = in.ConsumeIntegralInRange<int64_t>(0, 4);
  options.target_chunk_rows = in.ConsumeIntegralInRange<int64_t>(1, 64);
  options.clock = [] { return 1'700'000'000.0; };
  const bool append = in.ConsumeBool();
  options.mode = append ? rill::TableMode::kAppend : rill::TableMode::kSnapshot;
  if (!append && in.ConsumeBool()) options.primary_key = {"c0"};
  if (append || in.ConsumeBool()) {
    rill::RetentionPolicy policy;
    policy.max_rows = in.ConsumeIntegralInRange<int64_t>(0, 50);
    if (in.ConsumeBool()) policy.max_age_seconds = in.ConsumeIntegralInRange<int>(0, 100);
    options.retention = policy;
  }
  auto table = rill::LiveTable::Make("fuzz", arrow::schema(fields), options);
  if (!table.ok()) return nullptr;  // e.g. a key type the index cannot hash
  *keyed = (*table)->keyed();
  return *table;
}

std::shared_ptr<arrow::RecordBatch> MakeBatch(FuzzedDataProvider& in, const arrow::Schema& user) {
  const int64_t rows = in.ConsumeIntegralInRange<int64_t>(0, 40);
  arrow::FieldVector fields;
  arrow::ArrayVector columns;
  auto add = [&](const std::string& name, std::shared_ptr<arrow::DataType> type,
                 bool nullable) {
    columns.push_back(RandomArray(in, type, rows));
    fields.push_back(arrow::field(name, std::move(type), nullable));
  };
  for (const auto& f : user.fields()) {
    switch (in.ConsumeIntegralInRange<int>(0, 5)) {
      case 0: break;                                        // missing
      case 1: add(f->name(), PickType(in), true); break;    // another type
      case 2: add(f->name(), f->type(), true); add(f->name(), f->type(), true); break;
      default: add(f->name(), f->type(), f->nullable()); break;
    }
  }
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) add("unknown", PickType(in), true);
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) add("z_insert_ts", arrow::float64(), true);
  // Shuffle the column order.
  for (size_t i = fields.size(); i > 1; --i) {
    const size_t j = in.ConsumeIntegralInRange<size_t>(0, i - 1);
    std::swap(fields[i - 1], fields[j]);
    std::swap(columns[i - 1], columns[j]);
  }
  return arrow::RecordBatch::Make(arrow::schema(fields), rows, columns);
}

void CheckVersion(const rill::LiveTable& table, bool keyed) {
  auto contents = table.snapshot()->ToTable();
  FUZZ_CHECK(contents.ok(), contents.status().ToString());
  const auto& t = **contents;
  const auto valid = t.ValidateFull();
  FUZZ_CHECK(valid.ok(), valid.ToString());
  FUZZ_CHECK(t.num_rows() == table.num_rows(), "row count");
  const auto& retention = table.retention();
  if (retention && retention->max_rows) {
    FUZZ_CHECK(t.num_rows() <= *retention->max_rows, "max_rows");
  }
  if (!keyed) return;
  std::set<std::string> keys;
  const auto& key = t.GetColumnByName("c0");
  for (int64_t i = 0; i < t.num_rows(); ++i) {
    auto scalar = key->GetScalar(i).ValueOrDie();
    const std::string text = scalar->is_valid ? "v:" + scalar->ToString() : "null";
    FUZZ_CHECK(keys.insert(text).second, "key " + text + " held twice");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  bool keyed = false;
  auto table = MakeTable(in, &keyed);
  if (!table) return 0;
  const int batches = in.ConsumeIntegralInRange<int>(1, 4);
  for (int b = 0; b < batches && in.remaining_bytes() > 0; ++b) {
    auto batch = MakeBatch(in, *table->user_schema());
    auto reconciled = table->Reconcile(batch);
    if (!reconciled.ok()) {
      FUZZ_CHECK(reconciled.status().IsInvalid(), reconciled.status().ToString());
      FUZZ_CHECK(!reconciled.status().message().empty(), "an error without a message");
      continue;
    }
    const auto& out = **reconciled;
    FUZZ_CHECK(out.schema()->Equals(*table->user_schema(), /*check_metadata=*/false),
               out.schema()->ToString());
    FUZZ_CHECK(out.num_rows() == batch->num_rows(), "row count changed");
    const auto valid = out.ValidateFull();
    FUZZ_CHECK(valid.ok(), valid.ToString());
    auto written = table->Write(*reconciled);
    FUZZ_CHECK(written.ok(), written.status().ToString());
    CheckVersion(*table, keyed);
  }
  return 0;
}
