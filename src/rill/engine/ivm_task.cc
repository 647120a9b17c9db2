// ScheduledSqlTask's incremental maintenance (incremental = auto | true).
//
// The plan (sql/ivm_plan.h) says how the query's rows follow from its
// sources' changes. Each run reads every source's change feed (updates as
// their old values, retracted, then their new ones; retention expiries as
// deletes), shows the changes to DuckDB under the plan's scratch names, and
// runs the row stage: rows with a multiplicity __m. A query without
// aggregates turns them straight into upserts and deletes of the output by
// its key. An aggregate query folds them into per-group state kept here
// (count, sums as 128-bit integers or long doubles, min/max as ordered
// multisets, count(DISTINCT) as value counts), then runs the group stage
// over the groups that changed; the output gets their new rows, and deletes
// for groups that emptied or fail HAVING. A source read as a snapshot (the
// first run, or a reader that fell behind its log) rebuilds the state from
// the whole query instead.
#include <algorithm>
#include <cstring>
#include <string_view>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include <arrow/api.h>
#include <arrow/compute/api.h>

#include "rill/common/logging.h"
#include "rill/common/row_ops.h"
#include "rill/engine/task.h"
#include "rill/sql/ivm_plan.h"
#include "rill/sql/sql_engine.h"
#include "rill/table/change_feed.h"
#include "rill/table/live_table.h"
#include "rill/table/schema.h"

namespace rill {
namespace {

// One value of a group key or an aggregate argument.
using Cell = std::variant<std::monostate, int64_t, double, std::string>;

bool IsIntegerLike(arrow::Type::type id) {
  switch (id) {
    case arrow::Type::BOOL: case arrow::Type::INT8: case arrow::Type::INT16:
    case arrow::Type::INT32: case arrow::Type::INT64: case arrow::Type::UINT8:
    case arrow::Type::UINT16: case arrow::Type::UINT32: case arrow::Type::UINT64:
    case arrow::Type::DATE32: case arrow::Type::DATE64: case arrow::Type::TIMESTAMP:
    case arrow::Type::TIME32: case arrow::Type::TIME64: case arrow::Type::DURATION:
      return true;
    default:
      return false;
  }
}

bool Supported(const arrow::DataType& type) {
  const auto id = type.id();
  return IsIntegerLike(id) || id == arrow::Type::FLOAT || id == arrow::Type::DOUBLE ||
         id == arrow::Type::STRING || id == arrow::Type::LARGE_STRING ||
         id == arrow::Type::BINARY || id == arrow::Type::LARGE_BINARY ||
         id == arrow::Type::DECIMAL128 || id == arrow::Type::NA;
}

Cell ReadCell(const arrow::Array& a, int64_t i) {
  if (a.IsNull(i)) return std::monostate{};
  switch (a.type_id()) {
    case arrow::Type::BOOL: return int64_t{static_cast<const arrow::BooleanArray&>(a).Value(i)};
    case arrow::Type::INT8: return int64_t{static_cast<const arrow::Int8Array&>(a).Value(i)};
    case arrow::Type::INT16: return int64_t{static_cast<const arrow::Int16Array&>(a).Value(i)};
    case arrow::Type::INT32:
    case arrow::Type::DATE32:
    case arrow::Type::TIME32:
      return int64_t{a.data()->GetValues<int32_t>(1)[i]};
    case arrow::Type::INT64:
    case arrow::Type::DATE64:
    case arrow::Type::TIMESTAMP:
    case arrow::Type::TIME64:
    case arrow::Type::DURATION:
      return a.data()->GetValues<int64_t>(1)[i];
    case arrow::Type::UINT8: return int64_t{static_cast<const arrow::UInt8Array&>(a).Value(i)};
    case arrow::Type::UINT16: return int64_t{static_cast<const arrow::UInt16Array&>(a).Value(i)};
    case arrow::Type::UINT32: return int64_t{static_cast<const arrow::UInt32Array&>(a).Value(i)};
    case arrow::Type::UINT64:
      return static_cast<int64_t>(static_cast<const arrow::UInt64Array&>(a).Value(i));
    case arrow::Type::FLOAT: return double{static_cast<const arrow::FloatArray&>(a).Value(i)};
    case arrow::Type::DOUBLE: return static_cast<const arrow::DoubleArray&>(a).Value(i);
    case arrow::Type::STRING:
      return std::string(static_cast<const arrow::StringArray&>(a).GetView(i));
    case arrow::Type::LARGE_STRING:
      return std::string(static_cast<const arrow::LargeStringArray&>(a).GetView(i));
    case arrow::Type::BINARY:
      return std::string(static_cast<const arrow::BinaryArray&>(a).GetView(i));
    case arrow::Type::LARGE_BINARY:
      return std::string(static_cast<const arrow::LargeBinaryArray&>(a).GetView(i));
    case arrow::Type::DECIMAL128:
      return std::string(static_cast<const arrow::Decimal128Array&>(a).GetView(i));
    default:
      return std::monostate{};
  }
}

// Bytes of `cell` appended to `key` (one group or row identity).
void EncodeCell(const Cell& cell, std::string* key) {
  const char tag = static_cast<char>(cell.index());
  key->push_back(tag);
  if (const auto* i = std::get_if<int64_t>(&cell)) {
    key->append(reinterpret_cast<const char*>(i), sizeof(*i));
  } else if (const auto* d = std::get_if<double>(&cell)) {
    double v = *d == 0 ? 0.0 : *d;  // -0 and 0 are one group
    key->append(reinterpret_cast<const char*>(&v), sizeof(v));
  } else if (const auto* s = std::get_if<std::string>(&cell)) {
    const uint32_t n = static_cast<uint32_t>(s->size());
    key->append(reinterpret_cast<const char*>(&n), sizeof(n));
    key->append(*s);
  }
}

// EncodeCell(ReadCell(a, i), key) without making the Cell (no allocation).
void EncodeValue(const arrow::Array& a, int64_t i, std::string* key) {
  if (a.IsNull(i)) {
    key->push_back(0);
    return;
  }
  auto put_int = [key](int64_t v) {
    key->push_back(1);
    key->append(reinterpret_cast<const char*>(&v), sizeof(v));
  };
  auto put_bytes = [key](std::string_view v) {
    key->push_back(3);
    const uint32_t n = static_cast<uint32_t>(v.size());
    key->append(reinterpret_cast<const char*>(&n), sizeof(n));
    key->append(v);
  };
  switch (a.type_id()) {
    case arrow::Type::INT32:
    case arrow::Type::DATE32:
    case arrow::Type::TIME32:
      return put_int(a.data()->GetValues<int32_t>(1)[i]);
    case arrow::Type::INT64:
    case arrow::Type::DATE64:
    case arrow::Type::TIMESTAMP:
    case arrow::Type::TIME64:
    case arrow::Type::DURATION:
      return put_int(a.data()->GetValues<int64_t>(1)[i]);
    case arrow::Type::STRING:
      return put_bytes(static_cast<const arrow::StringArray&>(a).GetView(i));
    case arrow::Type::LARGE_STRING:
      return put_bytes(static_cast<const arrow::LargeStringArray&>(a).GetView(i));
    default:
      EncodeCell(ReadCell(a, i), key);
  }
}

__int128 DecimalValue(const std::string& bytes) {
  arrow::Decimal128 d(reinterpret_cast<const uint8_t*>(bytes.data()));
  return (static_cast<__int128>(d.high_bits()) << 64) | d.low_bits();
}

// Order of min/max values: numbers as numbers, decimals by value, strings by bytes.
struct CellLess {
  bool decimal = false;
  bool operator()(const Cell& a, const Cell& b) const {
    if (decimal) return DecimalValue(std::get<std::string>(a)) < DecimalValue(std::get<std::string>(b));
    return a < b;
  }
};

Status AppendCell(arrow::ArrayBuilder* b, const Cell& cell) {
  if (std::holds_alternative<std::monostate>(cell)) return b->AppendNull();
  switch (b->type()->id()) {
    case arrow::Type::BOOL:
      return static_cast<arrow::BooleanBuilder*>(b)->Append(std::get<int64_t>(cell) != 0);
    case arrow::Type::INT8:
      return static_cast<arrow::Int8Builder*>(b)->Append(static_cast<int8_t>(std::get<int64_t>(cell)));
    case arrow::Type::INT16:
      return static_cast<arrow::Int16Builder*>(b)->Append(static_cast<int16_t>(std::get<int64_t>(cell)));
    case arrow::Type::INT32:
      return static_cast<arrow::Int32Builder*>(b)->Append(static_cast<int32_t>(std::get<int64_t>(cell)));
    case arrow::Type::DATE32:
      return static_cast<arrow::Date32Builder*>(b)->Append(static_cast<int32_t>(std::get<int64_t>(cell)));
    case arrow::Type::TIME32:
      return static_cast<arrow::Time32Builder*>(b)->Append(static_cast<int32_t>(std::get<int64_t>(cell)));
    case arrow::Type::INT64:
      return static_cast<arrow::Int64Builder*>(b)->Append(std::get<int64_t>(cell));
    case arrow::Type::DATE64:
      return static_cast<arrow::Date64Builder*>(b)->Append(std::get<int64_t>(cell));
    case arrow::Type::TIMESTAMP:
      return static_cast<arrow::TimestampBuilder*>(b)->Append(std::get<int64_t>(cell));
    case arrow::Type::TIME64:
      return static_cast<arrow::Time64Builder*>(b)->Append(std::get<int64_t>(cell));
    case arrow::Type::DURATION:
      return static_cast<arrow::DurationBuilder*>(b)->Append(std::get<int64_t>(cell));
    case arrow::Type::UINT8:
      return static_cast<arrow::UInt8Builder*>(b)->Append(static_cast<uint8_t>(std::get<int64_t>(cell)));
    case arrow::Type::UINT16:
      return static_cast<arrow::UInt16Builder*>(b)->Append(static_cast<uint16_t>(std::get<int64_t>(cell)));
    case arrow::Type::UINT32:
      return static_cast<arrow::UInt32Builder*>(b)->Append(static_cast<uint32_t>(std::get<int64_t>(cell)));
    case arrow::Type::UINT64:
      return static_cast<arrow::UInt64Builder*>(b)->Append(static_cast<uint64_t>(std::get<int64_t>(cell)));
    case arrow::Type::FLOAT:
      return static_cast<arrow::FloatBuilder*>(b)->Append(static_cast<float>(std::get<double>(cell)));
    case arrow::Type::DOUBLE:
      return static_cast<arrow::DoubleBuilder*>(b)->Append(std::get<double>(cell));
    case arrow::Type::STRING:
      return static_cast<arrow::StringBuilder*>(b)->Append(std::get<std::string>(cell));
    case arrow::Type::LARGE_STRING:
      return static_cast<arrow::LargeStringBuilder*>(b)->Append(std::get<std::string>(cell));
    case arrow::Type::BINARY:
      return static_cast<arrow::BinaryBuilder*>(b)->Append(std::get<std::string>(cell));
    case arrow::Type::LARGE_BINARY:
      return static_cast<arrow::LargeBinaryBuilder*>(b)->Append(std::get<std::string>(cell));
    case arrow::Type::DECIMAL128:
      return static_cast<arrow::Decimal128Builder*>(b)->Append(
          arrow::Decimal128(reinterpret_cast<const uint8_t*>(std::get<std::string>(cell).data())));
    default:
      return Status::NotImplemented("incremental view: cannot build ", b->type()->ToString());
  }
}

// The state of one aggregate of one group.
struct AggState {
  int64_t count = 0;       // rows (count(*)) or non-null arguments
  __int128 int_sum = 0;    // sum / avg over integers and decimals
  long double float_sum = 0;
  // min / max: value -> rows (a hash map: O(1) per change), and the extreme,
  // found again by a scan of the values only when the extreme itself leaves.
  std::unordered_map<Cell, int64_t> values;
  bool decimal = false;  // the values are Decimal128 bytes (ordered by value)
  mutable Cell extreme;
  mutable bool extreme_valid = false;
  std::unordered_map<std::string, int64_t> distinct;  // count(DISTINCT): value -> rows
};

struct Group {
  std::vector<Cell> key;
  int64_t rows = 0;
  std::vector<AggState> aggs;
  bool changed = false;
  int64_t bytes = 0;  // its share of state_bytes, as last measured
};

// Estimated heap bytes of one group (with its entry in the group index).
int64_t GroupBytes(const Group& g) {
  int64_t bytes = 64 + static_cast<int64_t>(sizeof(Group) + g.key.size() * sizeof(Cell));
  for (const auto& s : g.aggs) {
    bytes += static_cast<int64_t>(sizeof(AggState) + (s.values.size() + s.distinct.size()) * 64);
  }
  return bytes;
}

std::shared_ptr<arrow::Table> Combined(const std::shared_ptr<arrow::Table>& t) {
  auto combined = t->CombineChunks();
  return combined.ok() ? *combined : t;
}


// The bytes of a checkpointed state (SaveState / LoadState).
class StateWriter {
 public:
  template <typename T>
  void Put(const T& v) { out_.append(reinterpret_cast<const char*>(&v), sizeof(T)); }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    out_.append(s);
  }
  void PutCell(const Cell& c) {
    Put<uint8_t>(static_cast<uint8_t>(c.index()));
    if (const auto* i = std::get_if<int64_t>(&c)) Put(*i);
    if (const auto* d = std::get_if<double>(&c)) Put(*d);
    if (const auto* t = std::get_if<std::string>(&c)) PutString(*t);
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

class StateReader {
 public:
  explicit StateReader(std::string_view in) : in_(in) {}
  template <typename T>
  Status Get(T* v) {
    if (in_.size() < sizeof(T)) return Status::Invalid("incremental view state: truncated");
    std::memcpy(v, in_.data(), sizeof(T));
    in_.remove_prefix(sizeof(T));
    return Status::OK();
  }
  Status GetString(std::string* s) {
    uint64_t n = 0;
    RILL_RETURN_NOT_OK(Get(&n));
    if (in_.size() < n) return Status::Invalid("incremental view state: truncated");
    s->assign(in_.data(), n);
    in_.remove_prefix(n);
    return Status::OK();
  }
  Status GetCell(Cell* c) {
    uint8_t tag = 0;
    RILL_RETURN_NOT_OK(Get(&tag));
    switch (tag) {
      case 0: *c = std::monostate{}; return Status::OK();
      case 1: { int64_t v = 0; RILL_RETURN_NOT_OK(Get(&v)); *c = v; return Status::OK(); }
      case 2: { double v = 0; RILL_RETURN_NOT_OK(Get(&v)); *c = v; return Status::OK(); }
      case 3: { std::string v; RILL_RETURN_NOT_OK(GetString(&v)); *c = std::move(v); return Status::OK(); }
      default: return Status::Invalid("incremental view state: bad value tag");
    }
  }
  bool done() const { return in_.empty(); }

 private:
  std::string_view in_;
};

constexpr uint64_t kStateMagic = 0x3156494c4c4952ULL;  // "RILLIV1"

}  // namespace

struct ScheduledSqlTask::Incremental {
  SqlEngine* sql = nullptr;
  IvmPlan plan;
  std::vector<std::shared_ptr<ChangeFeed>> feeds;
  std::vector<uint64_t> cursors;
  std::vector<std::shared_ptr<LiveTable>> scratch;  // registered in `sql`
  std::vector<std::shared_ptr<LiveTable>> tables;    // the sources the feeds read
  std::string output_name;
  std::weak_ptr<LiveTable> output_seen;  // the output table the state matches
  std::shared_ptr<LiveTable> groups_scratch;
  bool initialized = false;

  // Aggregate state.
  std::shared_ptr<arrow::Schema> stage_schema;
  std::unordered_map<std::string, int64_t> slots;  // encoded group -> groups index
  std::vector<Group> groups;
  std::vector<int64_t> free_slots;
  std::vector<int64_t> changed;
  int64_t state_bytes = 0;
  int64_t changes_read = 0, rows_upserted = 0, rows_deleted = 0, rebuilds = 0;

  ~Incremental() {
    for (const auto& t : scratch) (void)sql->UnregisterTable(t->name());
    if (groups_scratch) (void)sql->UnregisterTable(groups_scratch->name());
  }

  static Result<std::unique_ptr<Incremental>> Make(SqlEngine& sql, const std::string& task,
                                                   const std::string& query,
                                                   const std::string& output) {
    auto ivm = std::make_unique<Incremental>();
    ivm->sql = &sql;
    ivm->output_name = output;
    RILL_ASSIGN_OR_RAISE(ivm->plan, PlanIncremental(sql, query, "__rill_ivm_" + task));
    if (auto out = sql.RegisteredTable(output); out != nullptr) {
      if (!out->keyed() && !ivm->plan.output_key.empty()) {
        return Status::Invalid("the output table '", output,
                               "' exists without the view's key (",
                               ivm->plan.output_key.size(), " columns)");
      }
    }
    for (const auto& source : ivm->plan.sources) {
      auto table = sql.RegisteredTable(source.table);
      if (table == nullptr) return Status::KeyError("no table '", source.table, "'");
      std::vector<std::shared_ptr<arrow::Field>> fields = table->user_schema()->fields();
      fields.push_back(arrow::field("__m", arrow::int64(), false));
      TableOptions options;
      options.auto_compact_chunks = 0;
      RILL_ASSIGN_OR_RAISE(auto scratch,
                           LiveTable::Make(source.scratch, arrow::schema(fields), options));
      RILL_RETURN_NOT_OK(sql.RegisterTable(scratch));
      ivm->scratch.push_back(std::move(scratch));
      ivm->feeds.push_back(table->OpenChangeFeed());
      ivm->tables.push_back(table);
      ivm->cursors.push_back(0);
    }
    return ivm;
  }

  // A source's changes as rows of its scratch relation (__m: +1 / -1).
  Result<std::shared_ptr<arrow::Table>> DeltaTable(size_t i, const ChangeSet& changes) {
    const auto& schema = scratch[i]->schema();
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
    for (const auto& batch : changes.batches) {
      auto ops = std::static_pointer_cast<arrow::StringArray>(batch->GetColumnByName(kChangeOpColumn));
      arrow::Int64Builder mult;
      RILL_RETURN_NOT_OK(mult.Reserve(batch->num_rows()));
      for (int64_t r = 0; r < batch->num_rows(); ++r) {
        const auto op = ops->GetView(r);
        mult.UnsafeAppend(op == "delete" || op == "update_before" ? -1 : 1);
      }
      std::shared_ptr<arrow::Array> m;
      RILL_RETURN_NOT_OK(mult.Finish(&m));
      std::vector<std::shared_ptr<arrow::Array>> columns;
      for (const auto& f : schema->fields()) {
        if (f->name() == "__m") {
          columns.push_back(m);
        } else {
          auto column = batch->GetColumnByName(f->name());
          if (column == nullptr) return Status::Invalid("change batch without column ", f->name());
          columns.push_back(column);
        }
      }
      batches.push_back(arrow::RecordBatch::Make(schema, batch->num_rows(), columns));
    }
    // Rows in version order: a key's retraction of its old row comes before
    // its new row, so their multiplicities cancel in the stage as in the state.
    return arrow::Table::FromRecordBatches(schema, batches);
  }

  // ---- aggregate state ------------------------------------------------------

  int64_t SlotFor(const arrow::Table& stage, int64_t row, std::string* scratch_key) {
    scratch_key->clear();
    for (int g = 0; g < plan.num_groups; ++g) {
      EncodeValue(*stage.column(g)->chunk(0), row, scratch_key);
    }
    auto it = slots.find(*scratch_key);
    if (it != slots.end()) return it->second;
    std::vector<Cell> cells;
    for (int g = 0; g < plan.num_groups; ++g) {
      cells.push_back(ReadCell(*stage.column(g)->chunk(0), row));
    }
    int64_t slot;
    if (!free_slots.empty()) {
      slot = free_slots.back();
      free_slots.pop_back();
    } else {
      slot = static_cast<int64_t>(groups.size());
      groups.emplace_back();
    }
    Group& g = groups[slot];
    g = Group{};
    g.key = std::move(cells);
    g.aggs = NewAggStates(*stage.schema());
    slots.emplace(*scratch_key, slot);
    return slot;
  }

  Status Fold(const std::shared_ptr<arrow::Table>& stage_in) {
    auto stage = Combined(stage_in);
    if (stage->num_rows() == 0) return Status::OK();
    for (int c = 0; c < stage->num_columns() - 1; ++c) {
      if (!Supported(*stage->schema()->field(c)->type())) {
        return Status::NotImplemented("incremental view: the column ", stage->schema()->field(c)->name(),
                                      " has type ", stage->schema()->field(c)->type()->ToString());
      }
    }
    stage_schema = stage->schema();
    const auto& m = static_cast<const arrow::Int64Array&>(*stage->column(stage->num_columns() - 1)->chunk(0));
    std::string key;
    for (int64_t r = 0; r < stage->num_rows(); ++r) {
      const int64_t mult = m.Value(r);
      if (mult == 0) continue;
      const int64_t slot = SlotFor(*stage, r, &key);
      Group& g = groups[slot];
      g.rows += mult;
      if (!g.changed) {
        g.changed = true;
        changed.push_back(slot);
      }
      for (size_t j = 0; j < plan.aggregates.size(); ++j) {
        const IvmAggregate& agg = plan.aggregates[j];
        AggState& s = g.aggs[j];
        if (agg.kind == IvmAggregateKind::kCountStar) {
          s.count += mult;
          continue;
        }
        const arrow::Array& arg = *stage->column(agg.arg)->chunk(0);
        if (arg.IsNull(r)) continue;
        s.count += mult;
        switch (agg.kind) {
          case IvmAggregateKind::kSum:
          case IvmAggregateKind::kAvg: {
            if (arg.type_id() == arrow::Type::INT64) {
              s.int_sum += static_cast<__int128>(arg.data()->GetValues<int64_t>(1)[r]) * mult;
              break;
            }
            if (arg.type_id() == arrow::Type::DOUBLE) {
              s.float_sum +=
                  static_cast<long double>(arg.data()->GetValues<double>(1)[r]) * mult;
              break;
            }
            const Cell v = ReadCell(arg, r);
            if (const auto* i = std::get_if<int64_t>(&v)) {
              s.int_sum += static_cast<__int128>(*i) * mult;
            } else if (const auto* d = std::get_if<double>(&v)) {
              s.float_sum += static_cast<long double>(*d) * mult;
            } else {
              s.int_sum += DecimalValue(std::get<std::string>(v)) * mult;
            }
            break;
          }
          case IvmAggregateKind::kMin:
          case IvmAggregateKind::kMax: {
            auto [it, inserted] = s.values.emplace(ReadCell(arg, r), 0);
            const bool was_present = it->second > 0;
            it->second += mult;
            if (it->second > 0 && !was_present && s.extreme_valid) {
              const CellLess less{s.decimal};
              if (agg.kind == IvmAggregateKind::kMin ? less(it->first, s.extreme)
                                                     : less(s.extreme, it->first)) {
                s.extreme = it->first;
              }
            } else if (it->second <= 0 && was_present && s.extreme_valid &&
                       it->first == s.extreme) {
              s.extreme_valid = false;  // found again when emitted
            }
            if (it->second == 0) s.values.erase(it);
            break;
          }
          case IvmAggregateKind::kCountDistinct: {
            std::string k;
            EncodeCell(ReadCell(arg, r), &k);
            auto [it, inserted] = s.distinct.emplace(std::move(k), 0);
            it->second += mult;
            if (it->second == 0) s.distinct.erase(it);
            break;
          }
          default:
            break;
        }
      }
    }
    return Status::OK();
  }

  std::shared_ptr<arrow::DataType> AggType(const IvmAggregate& agg) const {
    switch (agg.kind) {
      case IvmAggregateKind::kCountStar:
      case IvmAggregateKind::kCount:
      case IvmAggregateKind::kCountDistinct:
        return arrow::int64();
      case IvmAggregateKind::kAvg:
        return arrow::float64();
      case IvmAggregateKind::kSum: {
        auto t = stage_schema->field(agg.arg)->type();
        if (t->id() == arrow::Type::FLOAT || t->id() == arrow::Type::DOUBLE) return arrow::float64();
        int32_t scale = t->id() == arrow::Type::DECIMAL128
                            ? static_cast<const arrow::Decimal128Type&>(*t).scale() : 0;
        return arrow::decimal128(38, scale);
      }
      default:
        return stage_schema->field(agg.arg)->type();
    }
  }

  Status AppendAggregate(arrow::ArrayBuilder* b, const IvmAggregate& agg, const AggState& s) {
    switch (agg.kind) {
      case IvmAggregateKind::kCountStar:
      case IvmAggregateKind::kCount:
        return static_cast<arrow::Int64Builder*>(b)->Append(s.count);
      case IvmAggregateKind::kCountDistinct:
        return static_cast<arrow::Int64Builder*>(b)->Append(static_cast<int64_t>(s.distinct.size()));
      case IvmAggregateKind::kSum:
        if (s.count == 0) return b->AppendNull();
        if (b->type()->id() == arrow::Type::DOUBLE) {
          return static_cast<arrow::DoubleBuilder*>(b)->Append(static_cast<double>(s.float_sum));
        }
        return static_cast<arrow::Decimal128Builder*>(b)->Append(arrow::Decimal128(
            static_cast<int64_t>(s.int_sum >> 64), static_cast<uint64_t>(s.int_sum)));
      case IvmAggregateKind::kAvg: {
        if (s.count == 0) return b->AppendNull();
        auto t = stage_schema->field(agg.arg)->type();
        long double sum = s.float_sum;
        if (t->id() != arrow::Type::FLOAT && t->id() != arrow::Type::DOUBLE) {
          sum = static_cast<long double>(s.int_sum);
          if (t->id() == arrow::Type::DECIMAL128) {
            for (int k = 0; k < static_cast<const arrow::Decimal128Type&>(*t).scale(); ++k) sum /= 10;
          }
        }
        return static_cast<arrow::DoubleBuilder*>(b)->Append(static_cast<double>(sum / s.count));
      }
      case IvmAggregateKind::kMin:
      case IvmAggregateKind::kMax: {
        if (!s.extreme_valid) {
          const CellLess less{s.decimal};
          const bool min = agg.kind == IvmAggregateKind::kMin;
          bool any = false;
          for (const auto& [v, n] : s.values) {
            if (n <= 0) continue;
            if (!any || (min ? less(v, s.extreme) : less(s.extreme, v))) s.extreme = v;
            any = true;
          }
          if (!any) return b->AppendNull();
          s.extreme_valid = true;
        }
        return AppendCell(b, s.extreme);
      }
    }
    return Status::OK();
  }

  // The groups relation of `slots_out` (__g*, __a*, __gid, system columns).
  Result<std::shared_ptr<arrow::Table>> GroupsTable(const std::vector<int64_t>& slots_out) {
    std::vector<std::shared_ptr<arrow::Field>> fields;
    for (int g = 0; g < plan.num_groups; ++g) {
      fields.push_back(arrow::field("__g" + std::to_string(g), stage_schema->field(g)->type()));
    }
    for (size_t j = 0; j < plan.aggregates.size(); ++j) {
      fields.push_back(arrow::field("__a" + std::to_string(j), AggType(plan.aggregates[j])));
    }
    fields.push_back(arrow::field("__gid", arrow::int64()));
    auto user = arrow::schema(fields);
    if (groups_scratch == nullptr) {
      TableOptions options;
      options.auto_compact_chunks = 0;
      RILL_ASSIGN_OR_RAISE(groups_scratch, LiveTable::Make(plan.groups_scratch, user, options));
      RILL_RETURN_NOT_OK(sql->RegisterTable(groups_scratch));
    } else if (!groups_scratch->user_schema()->Equals(*user)) {
      return Status::Invalid("incremental view: the group columns changed type");
    }
    const auto& schema = groups_scratch->schema();
    std::vector<std::shared_ptr<arrow::Array>> columns;
    for (const auto& f : schema->fields()) {
      std::unique_ptr<arrow::ArrayBuilder> b;
      RILL_RETURN_NOT_OK(arrow::MakeBuilder(arrow::default_memory_pool(), f->type(), &b));
      RILL_RETURN_NOT_OK(b->Reserve(static_cast<int64_t>(slots_out.size())));
      // What the column holds, read from its name once (not per row).
      const std::string& name = f->name();
      const bool gid = name == "__gid";
      const bool group = !gid && name.rfind("__g", 0) == 0;
      const bool aggregate = name.rfind("__a", 0) == 0;
      const size_t index = group || aggregate ? std::stoul(name.substr(3)) : 0;
      for (int64_t slot : slots_out) {
        const Group& g = groups[slot];
        if (gid) {
          RILL_RETURN_NOT_OK(static_cast<arrow::Int64Builder*>(b.get())->Append(slot));
        } else if (group) {
          RILL_RETURN_NOT_OK(AppendCell(b.get(), g.key[index]));
        } else if (aggregate) {
          RILL_RETURN_NOT_OK(AppendAggregate(b.get(), plan.aggregates[index], g.aggs[index]));
        } else {
          RILL_RETURN_NOT_OK(static_cast<arrow::DoubleBuilder*>(b.get())->Append(0));
        }
      }
      std::shared_ptr<arrow::Array> array;
      RILL_RETURN_NOT_OK(b->Finish(&array));
      columns.push_back(std::move(array));
    }
    return arrow::Table::Make(schema, columns, static_cast<int64_t>(slots_out.size()));
  }

  void ClearState() {
    slots.clear();
    groups.clear();
    free_slots.clear();
    changed.clear();
  }

  // The aggregates' empty states for a new group of a stage with `schema`.
  std::vector<AggState> NewAggStates(const arrow::Schema& schema) const {
    std::vector<AggState> states(plan.aggregates.size());
    for (size_t j = 0; j < states.size(); ++j) {
      const int arg = plan.aggregates[j].arg;
      states[j].decimal = arg >= 0 && schema.field(arg)->type()->id() == arrow::Type::DECIMAL128;
    }
    return states;
  }

  // state_bytes over every group (after a rebuild or a restore; runs keep it
  // up to date for the groups they change, in EmitGroups).
  void MeasureState() {
    state_bytes = 0;
    for (auto& g : groups) {
      g.bytes = g.aggs.empty() && g.key.empty() && g.rows == 0 ? 0 : GroupBytes(g);
      state_bytes += g.bytes;
    }
  }

  // Output rows of the changed groups: upserts, and deletes of the keys of
  // the groups that emptied or no longer pass HAVING.
  Result<TaskOutput> EmitGroups(bool replace_all) {
    std::vector<int64_t> live;
    if (replace_all) {
      for (const auto& [key, slot] : slots) {
        if (groups[slot].rows > 0 || plan.num_groups == 0) live.push_back(slot);
      }
    } else {
      for (int64_t slot : changed) {
        if (groups[slot].rows > 0 || plan.num_groups == 0) live.push_back(slot);
      }
    }
    if (plan.num_groups == 0 && live.empty()) {
      // A global aggregate over nothing: one group of no rows.
      const int64_t slot = static_cast<int64_t>(groups.size());
      groups.emplace_back();
      groups[slot].aggs = NewAggStates(*stage_schema);
      slots.emplace(std::string(), slot);
      live.push_back(slot);
    }
    RILL_ASSIGN_OR_RAISE(auto table, GroupsTable(live));
    RILL_ASSIGN_OR_RAISE(auto result,
                         sql->QueryWith(plan.final_sql, {{plan.groups_scratch, table}}));
    result = Combined(result);
    const int gid_column = result->num_columns() - 1;
    RILL_ASSIGN_OR_RAISE(auto rows, result->RemoveColumn(gid_column));
    TaskOutput out;
    out.key = plan.output_key;
    if (replace_all || plan.num_groups == 0) {
      out.table = rows;
      out.replace = true;
      rows_upserted += rows->num_rows();
    } else {
      // Deletes: changed groups not in the result.
      std::unordered_set<int64_t> kept;
      if (result->num_rows() > 0) {
        const auto& gid = static_cast<const arrow::Int64Array&>(*result->column(gid_column)->chunk(0));
        for (int64_t r = 0; r < gid.length(); ++r) kept.insert(gid.Value(r));
      }
      std::vector<int64_t> gone;
      for (int64_t slot : changed) {
        if (!kept.count(slot)) gone.push_back(slot);
      }
      RILL_ASSIGN_OR_RAISE(out.table, WithOps(rows, gone));
      out.replace = false;
      rows_upserted += rows->num_rows();
      rows_deleted += static_cast<int64_t>(gone.size());
    }
    // Forget the groups that emptied; measure the others again.
    for (int64_t slot : changed) {
      Group& g = groups[slot];
      g.changed = false;
      if (g.rows == 0 && plan.num_groups > 0) {
        std::string key;
        for (const auto& c : g.key) EncodeCell(c, &key);
        slots.erase(key);
        state_bytes -= g.bytes;
        g = Group{};
        free_slots.push_back(slot);
      } else {
        const int64_t bytes = GroupBytes(g);
        state_bytes += bytes - g.bytes;
        g.bytes = bytes;
      }
    }
    changed.clear();
    return out;
  }

  // `rows` (upserts) then delete rows for the keys of groups `gone`, with the op column.
  Result<std::shared_ptr<arrow::Table>> WithOps(const std::shared_ptr<arrow::Table>& rows,
                                                const std::vector<int64_t>& gone) {
    const auto& schema = rows->schema();
    std::vector<std::shared_ptr<arrow::Array>> columns;
    for (int c = 0; c < schema->num_fields(); ++c) {
      const auto& f = schema->field(c);
      std::shared_ptr<arrow::Array> tail;
      auto k = std::find(plan.output_key.begin(), plan.output_key.end(), f->name());
      if (k != plan.output_key.end()) {
        const int group = plan.key_groups[k - plan.output_key.begin()];
        std::unique_ptr<arrow::ArrayBuilder> b;
        RILL_RETURN_NOT_OK(arrow::MakeBuilder(arrow::default_memory_pool(), f->type(), &b));
        for (int64_t slot : gone) RILL_RETURN_NOT_OK(AppendCell(b.get(), groups[slot].key[group]));
        RILL_RETURN_NOT_OK(b->Finish(&tail));
      } else {
        RILL_ASSIGN_OR_RAISE(tail, arrow::MakeArrayOfNull(f->type(), static_cast<int64_t>(gone.size())));
      }
      std::vector<std::shared_ptr<arrow::Array>> parts = rows->column(c)->chunks();
      parts.push_back(tail);
      RILL_ASSIGN_OR_RAISE(auto joined, arrow::Concatenate(parts));
      columns.push_back(std::move(joined));
    }
    arrow::Int8Builder ops;
    for (int64_t r = 0; r < rows->num_rows(); ++r) RILL_RETURN_NOT_OK(ops.Append(static_cast<int8_t>(RowOp::kUpsert)));
    for (size_t r = 0; r < gone.size(); ++r) RILL_RETURN_NOT_OK(ops.Append(static_cast<int8_t>(RowOp::kDelete)));
    std::shared_ptr<arrow::Array> op_array;
    RILL_RETURN_NOT_OK(ops.Finish(&op_array));
    columns.push_back(op_array);
    auto fields = schema->fields();
    fields.push_back(arrow::field(kWriteOpColumn, arrow::int8(), false));
    return arrow::Table::Make(arrow::schema(fields), columns,
                              rows->num_rows() + static_cast<int64_t>(gone.size()));
  }

  // ---- rows without aggregates ----------------------------------------------

  Result<TaskOutput> EmitRows(const std::shared_ptr<arrow::Table>& stage_in, bool replace_all) {
    auto stage = Combined(stage_in);
    const int m_column = stage->num_columns() - 1;
    RILL_ASSIGN_OR_RAISE(auto rows, stage->RemoveColumn(m_column));
    TaskOutput out;
    out.key = plan.output_key;
    if (replace_all) {
      out.table = rows;
      out.replace = true;
      rows_upserted += rows->num_rows();
      return out;
    }
    if (stage->num_rows() == 0) return out;
    for (int c = 0; c < rows->num_columns(); ++c) {
      if (!Supported(*rows->schema()->field(c)->type())) {
        return Status::NotImplemented("incremental view: the column ", rows->schema()->field(c)->name(),
                                      " has type ", rows->schema()->field(c)->type()->ToString());
      }
    }
    const auto& m = static_cast<const arrow::Int64Array&>(*stage->column(m_column)->chunk(0));
    // Net multiplicity of each distinct row, then per key: a row still
    // present is upserted, else the key is deleted.
    std::unordered_map<std::string, std::pair<int64_t, int64_t>> net;  // row -> (mult, index)
    std::vector<std::string> order;
    std::string key;
    for (int64_t r = 0; r < stage->num_rows(); ++r) {
      key.clear();
      for (int c = 0; c < rows->num_columns(); ++c) EncodeValue(*rows->column(c)->chunk(0), r, &key);
      auto [it, inserted] = net.emplace(key, std::make_pair(int64_t{0}, r));
      if (inserted) order.push_back(key);
      it->second.first += m.Value(r);
    }
    std::unordered_map<std::string, std::pair<int64_t, bool>> by_key;  // key -> (row, upsert)
    std::vector<std::string> keys_in_order;
    for (const auto& row : order) {
      const auto& [mult, index] = net[row];
      if (mult == 0) continue;
      key.clear();
      for (int c : plan.key_columns) EncodeValue(*rows->column(c)->chunk(0), index, &key);
      auto [it, inserted] = by_key.emplace(key, std::make_pair(index, mult > 0));
      if (inserted) {
        keys_in_order.push_back(key);
      } else if (mult > 0 && !it->second.second) {
        it->second = {index, true};
      }
    }
    if (keys_in_order.empty()) return out;
    arrow::Int64Builder take;
    arrow::Int8Builder ops;
    for (const auto& k : keys_in_order) {
      const auto& [index, upsert] = by_key[k];
      RILL_RETURN_NOT_OK(take.Append(index));
      RILL_RETURN_NOT_OK(ops.Append(static_cast<int8_t>(upsert ? RowOp::kUpsert : RowOp::kDelete)));
      if (upsert) ++rows_upserted; else ++rows_deleted;
    }
    std::shared_ptr<arrow::Array> indices, op_array;
    RILL_RETURN_NOT_OK(take.Finish(&indices));
    RILL_RETURN_NOT_OK(ops.Finish(&op_array));
    RILL_ASSIGN_OR_RAISE(auto taken, arrow::compute::Take(rows, indices));
    auto table = taken.table();
    RILL_ASSIGN_OR_RAISE(table, table->AddColumn(table->num_columns(),
                                                 arrow::field(kWriteOpColumn, arrow::int8(), false),
                                                 std::make_shared<arrow::ChunkedArray>(op_array)));
    out.table = table;
    out.replace = false;
    return out;
  }

  // ---- one run --------------------------------------------------------------

  Result<std::string> SaveState(const std::string& query) {
    if (!initialized) return std::string();
    StateWriter w;
    w.Put(kStateMagic);
    w.PutString(query);
    w.Put<uint8_t>(plan.aggregate ? 1 : 0);
    if (plan.aggregate) {
      uint64_t live = 0;
      for (const auto& [key, slot] : slots) live += groups[slot].rows > 0 || plan.num_groups == 0;
      w.Put(live);
      for (const auto& [key, slot] : slots) {
        const Group& g = groups[slot];
        if (!(g.rows > 0 || plan.num_groups == 0)) continue;
        for (const auto& c : g.key) w.PutCell(c);
        w.Put(g.rows);
        for (const auto& a : g.aggs) {
          w.Put(a.count);
          w.Put(a.int_sum);
          w.Put(a.float_sum);
          w.Put<uint64_t>(a.values.size());
          for (const auto& [v, n] : a.values) {
            w.PutCell(v);
            w.Put(n);
          }
          w.Put<uint64_t>(a.distinct.size());
          for (const auto& [v, n] : a.distinct) {
            w.PutString(v);
            w.Put(n);
          }
        }
      }
    }
    return std::move(w.out());
  }

  // The state of SaveState, over tables that hold what the checkpoint held:
  // the feeds (opened by Make, just now) start at their current versions.
  Status LoadState(const std::string& query, std::string_view bytes) {
    StateReader r(bytes);
    uint64_t magic = 0;
    RILL_RETURN_NOT_OK(r.Get(&magic));
    std::string saved_query;
    RILL_RETURN_NOT_OK(r.GetString(&saved_query));
    if (magic != kStateMagic || saved_query != query) {
      return Status::Invalid("the saved state is of another query");
    }
    uint8_t aggregate = 0;
    RILL_RETURN_NOT_OK(r.Get(&aggregate));
    if ((aggregate != 0) != plan.aggregate) return Status::Invalid("the saved state is of another plan");
    ClearState();
    if (plan.aggregate) {
      // The stage's column types (the groups relation is built from them).
      RILL_ASSIGN_OR_RAISE(auto empty, sql->Query(plan.full_sql + " LIMIT 0"));
      stage_schema = empty->schema();
      uint64_t live = 0;
      RILL_RETURN_NOT_OK(r.Get(&live));
      for (uint64_t k = 0; k < live; ++k) {
        Group g;
        std::string key;
        for (int i = 0; i < plan.num_groups; ++i) {
          Cell c;
          RILL_RETURN_NOT_OK(r.GetCell(&c));
          EncodeCell(c, &key);
          g.key.push_back(std::move(c));
        }
        RILL_RETURN_NOT_OK(r.Get(&g.rows));
        g.aggs = NewAggStates(*stage_schema);
        for (AggState& a : g.aggs) {
          RILL_RETURN_NOT_OK(r.Get(&a.count));
          RILL_RETURN_NOT_OK(r.Get(&a.int_sum));
          RILL_RETURN_NOT_OK(r.Get(&a.float_sum));
          uint64_t n = 0;
          RILL_RETURN_NOT_OK(r.Get(&n));
          for (uint64_t e = 0; e < n; ++e) {
            Cell v;
            int64_t count = 0;
            RILL_RETURN_NOT_OK(r.GetCell(&v));
            RILL_RETURN_NOT_OK(r.Get(&count));
            a.values.emplace(std::move(v), count);
          }
          RILL_RETURN_NOT_OK(r.Get(&n));
          for (uint64_t e = 0; e < n; ++e) {
            std::string v;
            int64_t count = 0;
            RILL_RETURN_NOT_OK(r.GetString(&v));
            RILL_RETURN_NOT_OK(r.Get(&count));
            a.distinct.emplace(std::move(v), count);
          }
        }
        slots.emplace(std::move(key), static_cast<int64_t>(groups.size()));
        groups.push_back(std::move(g));
      }
    }
    if (!r.done()) return Status::Invalid("incremental view state: trailing bytes");
    for (size_t i = 0; i < feeds.size(); ++i) cursors[i] = feeds[i]->current_version();
    if (auto out = sql->RegisteredTable(output_name)) output_seen = out;
    initialized = true;
    MeasureState();
    return Status::OK();
  }

  Result<TaskOutput> Rebuild() {
    ++rebuilds;
    for (size_t i = 0; i < feeds.size(); ++i) cursors[i] = feeds[i]->current_version();
    RILL_ASSIGN_OR_RAISE(auto stage, sql->Query(plan.full_sql));
    initialized = true;
    for (size_t i = 0; i < feeds.size(); ++i) feeds[i]->Acknowledge(cursors[i]);
    if (!plan.aggregate) return EmitRows(stage, /*replace_all=*/true);
    ClearState();
    stage_schema = stage->schema();
    RILL_RETURN_NOT_OK(Fold(stage));
    for (auto& g : groups) g.changed = false;
    changed.clear();
    auto out = EmitGroups(/*replace_all=*/true);
    MeasureState();
    return out;
  }

  // A source dropped and made again, or an output table replaced or dropped:
  // the feeds (or the output) no longer match the state.
  Status CheckTables(bool* rebuild) {
    for (size_t i = 0; i < tables.size(); ++i) {
      auto current = sql->RegisteredTable(plan.sources[i].table);
      if (current == nullptr) return Status::KeyError("no live table '", plan.sources[i].table, "'");
      if (current != tables[i]) {
        tables[i] = current;
        feeds[i] = current->OpenChangeFeed();
        *rebuild = true;
      }
    }
    auto out = sql->RegisteredTable(output_name);
    auto seen = output_seen.lock();
    if (out == nullptr || (seen != nullptr && seen != out)) *rebuild = true;
    if (out != nullptr) output_seen = out;
    return Status::OK();
  }

  Result<TaskOutput> Run() {
    bool rebuild = !initialized;
    RILL_RETURN_NOT_OK(CheckTables(&rebuild));
    if (rebuild) return Rebuild();
    ChangeReadOptions options;
    options.include_old_values = true;
    options.emit_retention_deletes = true;
    std::vector<std::pair<std::string, std::shared_ptr<arrow::Table>>> deltas;
    std::vector<ChangeSet> sets(feeds.size());
    uint32_t present = 0;
    for (size_t i = 0; i < feeds.size(); ++i) {
      RILL_ASSIGN_OR_RAISE(sets[i], feeds[i]->Read(cursors[i], options));
      if (sets[i].snapshot) return Rebuild();
      if (sets[i].num_rows > 0) present |= 1u << i;
    }
    for (size_t i = 0; i < feeds.size(); ++i) {
      cursors[i] = sets[i].to_version;
      if ((present >> i) & 1) {
        changes_read += sets[i].num_rows;
        RILL_ASSIGN_OR_RAISE(auto delta, DeltaTable(i, sets[i]));
        deltas.emplace_back(plan.sources[i].scratch, std::move(delta));
      }
    }
    if (present == 0) return TaskOutput{nullptr, false, {}};
    std::vector<std::string> terms;
    bool flips = false;
    for (const auto& term : plan.terms) {
      if ((term.delta_sources & present) != term.delta_sources) continue;
      terms.push_back(term.sql);
      flips = flips || term.sql.find("__flips") != std::string::npos;
    }
    std::string stage_sql = flips ? plan.with_clause : std::string();
    for (size_t t = 0; t < terms.size(); ++t) stage_sql += (t ? " UNION ALL " : "") + terms[t];
    RILL_ASSIGN_OR_RAISE(auto stage, sql->QueryWith(stage_sql, deltas));
    for (size_t i = 0; i < feeds.size(); ++i) feeds[i]->Acknowledge(cursors[i]);
    if (!plan.aggregate) return EmitRows(stage, /*replace_all=*/false);
    RILL_RETURN_NOT_OK(Fold(stage));
    if (changed.empty()) return TaskOutput{nullptr, false, {}};
    return EmitGroups(/*replace_all=*/false);
  }
};

ScheduledSqlTask::ScheduledSqlTask(std::string name, std::string query,
                                   std::string output_table, double interval_seconds,
                                   std::vector<std::string> primary_key,
                                   bool use_prepared_statements,
                                   std::optional<RetentionPolicy> retention,
                                   IncrementalMode incremental)
    : Task(std::move(name), std::move(output_table), interval_seconds, std::move(primary_key),
           std::move(retention)),
      query_(std::move(query)),
      use_prepared_statements_(use_prepared_statements),
      incremental_(incremental) {}

ScheduledSqlTask::~ScheduledSqlTask() = default;

Status ScheduledSqlTask::CheckIncremental(SqlEngine& sql, const std::string& query) {
  return PlanIncremental(sql, query, "__rill_ivm_check").status();
}

Result<TaskOutput> ScheduledSqlTask::Run(SqlEngine& sql, double now) {
  if (!ivm_decided_) {
    if (incremental_ == IncrementalMode::kOff) {
      maintenance_ = "recompute (incremental=false)";
      ivm_decided_ = true;
    } else {
      auto made = Incremental::Make(sql, name(), query_, output_table());
      if (made.ok()) {
        ivm_ = std::move(made).ValueUnsafe();
        maintenance_ = "incremental";
        ivm_decided_ = true;
      } else if (incremental_ == IncrementalMode::kOn) {
        return Status::Invalid("task '", name(), "' (incremental=true): ",
                               made.status().message());
      } else if (made.status().message().find("is not maintainable") == std::string::npos) {
        // The query does not bind yet (a table made later): decided on a later run.
        maintenance_ = "recompute (" + made.status().message() + ")";
      } else {
        maintenance_ = "recompute (" + made.status().message() + ")";
        ivm_decided_ = true;
        Logger("engine")->info("task '{}' re-runs its query every {} s: {}", name(),
                               interval_seconds(), made.status().message());
      }
    }
  }
  if (ivm_ != nullptr) {
    auto out = ivm_->Run();
    if (out.ok() || incremental_ == IncrementalMode::kOn) {
      if (!out.ok()) return Status::Invalid("task '", name(), "': ", out.status().message());
      return out;
    }
    // auto: a failure of the maintenance (a type it cannot keep) falls back, once.
    maintenance_ = "recompute (" + out.status().message() + ")";
    Logger("engine")->warn("task '{}' falls back to re-running its query: {}", name(),
                           out.status().message());
    ivm_.reset();
  }
  (void)now;
  return Recompute(sql);
}

Result<std::string> ScheduledSqlTask::SaveState() {
  if (ivm_ == nullptr) return std::string();
  return ivm_->SaveState(query_);
}

Status ScheduledSqlTask::RestoreState(SqlEngine& sql, std::string_view state) {
  if (incremental_ == IncrementalMode::kOff || state.empty()) return Status::OK();
  ivm_.reset();
  RILL_ASSIGN_OR_RAISE(auto ivm, Incremental::Make(sql, name(), query_, output_table()));
  RILL_RETURN_NOT_OK(ivm->LoadState(query_, state));
  ivm_ = std::move(ivm);
  ivm_decided_ = true;
  maintenance_ = "incremental";
  return Status::OK();
}

void ScheduledSqlTask::FillStats(TaskStats* stats) const {
  if (maintenance_.empty()) return;
  stats->maintenance = maintenance_;
  if (ivm_ != nullptr) {
    stats->state_bytes = ivm_->state_bytes;
    stats->changes_read = ivm_->changes_read;
    stats->rows_upserted = ivm_->rows_upserted;
    stats->rows_deleted = ivm_->rows_deleted;
    stats->rebuilds = ivm_->rebuilds;
  }
}

}  // namespace rill
