// AvroDecoder: resolution plans (writer node -> column) and the walk that
// runs them over a record's bytes.
#include "rill/connector/avro_decoder.h"

#include <algorithm>
#include <unordered_map>

#include <arrow/array/data.h>
#include <arrow/memory_pool.h>
#include <arrow/record_batch.h>
#include <arrow/util/utf8.h>

#include "rill/connector/avro_decoder_internal.h"

namespace rill {

using avro_internal::BadAt;
using avro_internal::Col;
using avro_internal::ColKind;
using avro_internal::Cursor;

namespace {

/// Whether `n` bytes at `s` are valid UTF-8: ASCII runs checked 8 bytes at a
/// time inline (most strings), the rest by Arrow.
bool ValidUtf8(const uint8_t* s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, s + i, 8);
    if (w & 0x8080808080808080ULL) return arrow::util::ValidateUTF8(s + i, n - i);
  }
  for (; i < n; ++i) {
    if (s[i] & 0x80) return arrow::util::ValidateUTF8(s + i, n - i);
  }
  return true;
}

/// What a plan step does with one writer value.
enum class Op : uint8_t {
  kSkip,     // read and drop (no column)
  kNull,     // writer null: a null entry
  kBool,
  kInt,      // int / long into an integer, float, date, time or timestamp column
  kFloat,    // float / double into a float column
  kString,   // string / bytes into a string or binary column
  kFixed,    // fixed into a binary column (or a uuid into a string column)
  kDecimal,  // decimal bytes / fixed into decimal128, float64 or utf8
  kEnum,
  kRecord,
  kArray,
  kMap,
  kUnion,
  kJson,     // any value into a utf8 column as its JSON text
  kFail,     // a writer type the column cannot hold
};

/// One step of a resolution plan: how the writer's node `w` goes to `col`.
struct Plan {
  Op op = Op::kSkip;
  const AvroNode* w = nullptr;
  Col* col = nullptr;
  const std::string* name = nullptr;  ///< the field name (record fields)
  int64_t mul = 1, div = 1;           ///< kInt: unit conversion of time values
  bool zero_size_items = false;       ///< kArray: items take no bytes
  std::string error;                  ///< kFail
  /// kRecord: one per writer field, in writer order; kArray / kMap: [items];
  /// kUnion: one per branch.
  std::vector<Plan> children;
  /// kRecord: the struct's columns the writer does not have (null each row).
  std::vector<Col*> missing;
};

const char* AvroTypeName(const AvroNode& w) {
  switch (w.type) {
    case AvroType::kNull: return "null";
    case AvroType::kBoolean: return "boolean";
    case AvroType::kInt: return "int";
    case AvroType::kLong: return "long";
    case AvroType::kFloat: return "float";
    case AvroType::kDouble: return "double";
    case AvroType::kBytes: return "bytes";
    case AvroType::kString: return "string";
    case AvroType::kRecord: return "record";
    case AvroType::kEnum: return "enum";
    case AvroType::kArray: return "array";
    case AvroType::kMap: return "map";
    case AvroType::kUnion: return "union";
    case AvroType::kFixed: return "fixed";
  }
  return "?";
}

/// Units per second of a time unit.
int64_t PerSecond(arrow::TimeUnit::type u) {
  switch (u) {
    case arrow::TimeUnit::SECOND: return 1;
    case arrow::TimeUnit::MILLI: return 1000;
    case arrow::TimeUnit::MICRO: return 1000000;
    case arrow::TimeUnit::NANO: return 1000000000;
  }
  return 1;
}

/// Units per second of a writer's time logical type (0: none, no conversion).
int64_t WriterPerSecond(const AvroNode& w) {
  switch (w.logical) {
    case AvroLogical::kTimeMillis:
    case AvroLogical::kTimestampMillis:
    case AvroLogical::kLocalTimestampMillis: return 1000;
    case AvroLogical::kTimeMicros:
    case AvroLogical::kTimestampMicros:
    case AvroLogical::kLocalTimestampMicros: return 1000000;
    default: return 0;
  }
}

Plan Fail(const AvroNode& w, Col* col, std::string why = {}) {
  Plan p;
  p.op = Op::kFail;
  p.w = &w;
  p.col = col;
  p.error = why.empty() ? std::string("Avro ") + AvroTypeName(w) + " cannot be read as " +
                              col->field->type()->ToString()
                        : std::move(why);
  return p;
}

Plan Resolve(const AvroNode& w, Col* col) {
  Plan p;
  p.w = &w;
  p.col = col;
  if (w.type == AvroType::kUnion) {
    p.op = Op::kUnion;
    for (const AvroNode* b : w.branches) p.children.push_back(Resolve(*b, col));
    return p;
  }
  if (w.type == AvroType::kNull) {
    p.op = Op::kNull;
    return p;
  }
  const ColKind k = col->kind;
  if (w.logical == AvroLogical::kDecimal) {
    if (k == ColKind::kDecimal) {
      if (col->scale < w.scale) {
        return Fail(w, col, "decimal of scale " + std::to_string(w.scale) +
                                " cannot be read with the smaller scale " +
                                std::to_string(col->scale));
      }
      p.op = Op::kDecimal;
      return p;
    }
    if (k == ColKind::kFloat64 || k == ColKind::kString) {
      p.op = Op::kDecimal;
      return p;
    }
  }
  switch (w.type) {
    case AvroType::kBoolean:
      if (k == ColKind::kBool) p.op = Op::kBool;
      break;
    case AvroType::kInt:
    case AvroType::kLong: {
      const int64_t from = WriterPerSecond(w);
      switch (k) {
        case ColKind::kInt8:
        case ColKind::kInt16:
        case ColKind::kInt32:
        case ColKind::kInt64:
        case ColKind::kFloat32:
        case ColKind::kFloat64:
        case ColKind::kDate32:
          p.op = Op::kInt;
          break;
        case ColKind::kTime32:
        case ColKind::kTime64:
        case ColKind::kTimestamp: {
          p.op = Op::kInt;
          if (from != 0) {
            const int64_t to = PerSecond(col->unit);
            if (to >= from) {
              p.mul = to / from;
            } else {
              p.div = from / to;
            }
          }
          break;
        }
        default: break;
      }
      break;
    }
    case AvroType::kFloat:
    case AvroType::kDouble:
      if (k == ColKind::kFloat32 || k == ColKind::kFloat64) p.op = Op::kFloat;
      break;
    case AvroType::kString:
    case AvroType::kBytes:
      if (k == ColKind::kString || k == ColKind::kBinary) p.op = Op::kString;
      break;
    case AvroType::kFixed:
      if (k == ColKind::kBinary || (k == ColKind::kString && w.logical == AvroLogical::kUuid)) {
        p.op = Op::kFixed;
      }
      break;
    case AvroType::kEnum:
      if (k == ColKind::kString) p.op = Op::kEnum;
      break;
    case AvroType::kRecord:
      if (k == ColKind::kStruct) {
        p.op = Op::kRecord;
        std::vector<bool> seen(col->children.size(), false);
        for (const auto& f : w.fields) {
          Col* child = nullptr;
          for (size_t i = 0; i < col->children.size(); ++i) {
            if (col->children[i]->field->name() == f.name) {
              child = col->children[i].get();
              seen[i] = true;
              break;
            }
          }
          Plan fp;
          if (child) {
            fp = Resolve(*f.type, child);
          } else {
            fp.op = Op::kSkip;
            fp.w = f.type;
          }
          fp.name = &f.name;
          p.children.push_back(std::move(fp));
        }
        for (size_t i = 0; i < col->children.size(); ++i) {
          if (!seen[i]) p.missing.push_back(col->children[i].get());
        }
      }
      break;
    case AvroType::kArray:
      if (k == ColKind::kList) {
        p.op = Op::kArray;
        p.zero_size_items = avro_internal::ZeroSize(*w.items);
        p.children.push_back(Resolve(*w.items, col->children[0].get()));
      }
      break;
    case AvroType::kMap:
      if (k == ColKind::kMap) {
        p.op = Op::kMap;
        p.children.push_back(Resolve(*w.items, col->children[1].get()));
      }
      break;
    default: break;
  }
  if (p.op != Op::kSkip) return p;
  if (k == ColKind::kString) {
    p.op = Op::kJson;
    return p;
  }
  return Fail(w, col);
}

}  // namespace

class AvroDecoder::Impl {
 public:
  explicit Impl(AvroDecodeOptions options)
      : options_(std::move(options)),
        pool_(options_.pool ? options_.pool : arrow::default_memory_pool()) {
    limits_.max_depth = options_.max_depth;
    limits_.max_value_bytes = options_.max_value_bytes;
  }

  Status SetSchema(std::shared_ptr<arrow::Schema> schema) {
    plans_.clear();
    rows_ = 0;
    root_ = std::make_unique<Col>(pool_);
    root_->kind = ColKind::kStruct;
    arrow::FieldVector fields;
    for (const auto& f : schema->fields()) {
      root_->children.push_back(avro_internal::MakeCol(f, pool_));
      fields.push_back(root_->children.back()->field);
    }
    root_->field = arrow::field("", arrow::struct_(fields));
    schema_ = arrow::schema(std::move(fields), schema->metadata());
    return Status::OK();
  }

  Status Append(const std::shared_ptr<const AvroSchema>& writer, std::string_view data,
                int64_t base_offset, int64_t* consumed) {
    if (!schema_) {
      RILL_ASSIGN_OR_RAISE(auto schema, writer->ToArrowSchema());
      RILL_RETURN_NOT_OK(SetSchema(std::move(schema)));
    }
    const Plan& plan = PlanFor(writer);
    Cursor c{reinterpret_cast<const uint8_t*>(data.data()),
             reinterpret_cast<const uint8_t*>(data.data()) + data.size(),
             reinterpret_cast<const uint8_t*>(data.data()), base_offset};
    depth_ = 0;
    Status st = Run(plan, &c);
    if (st.ok() && consumed == nullptr && c.p != c.end) {
      st = BadAt(c, std::to_string(c.end - c.p) + " bytes left after the record");
    }
    if (!st.ok()) {
      Rollback(root_.get(), rows_);
      return InField(std::move(st));
    }
    ++rows_;
    if (consumed) *consumed = c.p - c.begin;
    return Status::OK();
  }

  Result<std::shared_ptr<arrow::RecordBatch>> Flush() {
    if (rows_ == 0) return nullptr;
    std::vector<std::shared_ptr<arrow::ArrayData>> columns;
    for (auto& col : root_->children) {
      RILL_ASSIGN_OR_RAISE(auto a, avro_internal::FinishCol(col.get()));
      columns.push_back(std::move(a));
    }
    auto batch = arrow::RecordBatch::Make(schema_, rows_, std::move(columns));
    rows_ = 0;
    root_->length = 0;
    root_->valid.clear();
    return batch;
  }

  int64_t num_rows() const { return rows_; }
  std::shared_ptr<arrow::Schema> schema() const { return schema_; }

 private:
  const Plan& PlanFor(const std::shared_ptr<const AvroSchema>& writer) {
    auto it = plans_.find(writer.get());
    if (it != plans_.end()) return it->second.plan;
    Entry e{writer, Resolve(writer->root(), root_.get())};
    return plans_.emplace(writer.get(), std::move(e)).first->second.plan;
  }

  /// "field 'a.b': <what>" from the status of a step.
  Status InField(Status st) const {
    if (depth_ == 0) return st;
    std::string path;
    for (int i = 0; i < std::min(depth_, kMaxPath); ++i) {
      if (!path.empty()) path += '.';
      path += *path_[i];
    }
    return st.WithMessage("field '", path, "': ", st.message());
  }

  Status Run(const Plan& p, Cursor* c) {
    Col* col = p.col;
    int64_t n = 0;
    switch (p.op) {
      case Op::kSkip:
        return avro_internal::SkipValue(c, *p.w, limits_, 0);
      case Op::kNull:
        return col->AppendNull();
      case Op::kBool: {
        if (c->p == c->end) return BadAt(*c, "record ends inside a value");
        const uint8_t b = *c->p;
        if (b > 1) return BadAt(*c, "boolean byte not 0 or 1");
        ++c->p;
        return col->AppendValue<uint8_t>(b);
      }
      case Op::kInt:
        return RunInt(p, c);
      case Op::kFloat: {
        double v;
        if (p.w->type == AvroType::kFloat) {
          if (c->left() < 4) return BadAt(*c, "record ends inside a value");
          float f;
          std::memcpy(&f, c->p, 4);
          c->p += 4;
          v = f;
        } else {
          if (c->left() < 8) return BadAt(*c, "record ends inside a value");
          std::memcpy(&v, c->p, 8);
          c->p += 8;
        }
        if (col->kind == ColKind::kFloat32) return col->AppendValue(static_cast<float>(v));
        return col->AppendValue(v);
      }
      case Op::kString: {
        const Cursor at = *c;
        RILL_RETURN_NOT_OK(avro_internal::ReadLength(c, limits_, &n));
        const uint8_t* s = c->p;
        c->p += n;
        if (col->kind == ColKind::kString && !ValidUtf8(s, n)) {
          return BadAt(at, "invalid UTF-8");
        }
        return col->AppendBytes(s, n);
      }
      case Op::kFixed: {
        const int64_t size = p.w->size;
        if (c->left() < size) return BadAt(*c, "record ends inside a value");
        const uint8_t* s = c->p;
        c->p += size;
        if (col->kind == ColKind::kString) {  // uuid
          static const char* kHex = "0123456789abcdef";
          char text[36];
          int o = 0;
          for (int i = 0; i < 16; ++i) {
            if (i == 4 || i == 6 || i == 8 || i == 10) text[o++] = '-';
            text[o++] = kHex[s[i] >> 4];
            text[o++] = kHex[s[i] & 15];
          }
          return col->AppendBytes(reinterpret_cast<const uint8_t*>(text), 36);
        }
        return col->AppendBytes(s, size);
      }
      case Op::kDecimal:
        return RunDecimal(p, c);
      case Op::kEnum: {
        const Cursor at = *c;
        RILL_RETURN_NOT_OK(avro_internal::ReadInt(c, &n));
        if (n < 0 || n >= static_cast<int64_t>(p.w->symbols.size())) {
          return BadAt(at, "enum index " + std::to_string(n) + " out of range (" +
                               std::to_string(p.w->symbols.size()) + " symbols)");
        }
        const std::string& sym = p.w->symbols[static_cast<size_t>(n)];
        return col->AppendBytes(reinterpret_cast<const uint8_t*>(sym.data()),
                                static_cast<int64_t>(sym.size()));
      }
      case Op::kRecord: {
        for (const Plan& f : p.children) {
          // On an error path_[0, depth_) names the field (a bounded stack:
          // plans nest only as deep as the reader schema).
          if (depth_ < kMaxPath) path_[depth_] = f.name;
          ++depth_;
          RILL_RETURN_NOT_OK(Run(f, c));
          --depth_;
        }
        for (Col* m : p.missing) RILL_RETURN_NOT_OK(m->AppendNull());
        col->CloseStruct();
        return Status::OK();
      }
      case Op::kArray: {
        Col* items = col->children[0].get();
          while (true) {
          int64_t count = 0;
          RILL_RETURN_NOT_OK(avro_internal::ReadBlockCount(c, p.zero_size_items, &count));
          if (count == 0) break;
          for (int64_t i = 0; i < count; ++i) RILL_RETURN_NOT_OK(Run(p.children[0], c));
        }
        return col->CloseEntry(items->length);
      }
      case Op::kMap: {
        Col* keys = col->children[0].get();
          while (true) {
          int64_t count = 0;
          RILL_RETURN_NOT_OK(avro_internal::ReadBlockCount(c, false, &count));
          if (count == 0) break;
          for (int64_t i = 0; i < count; ++i) {
            const Cursor at = *c;
            RILL_RETURN_NOT_OK(avro_internal::ReadLength(c, limits_, &n));
            const uint8_t* s = c->p;
            c->p += n;
            if (!ValidUtf8(s, n)) return BadAt(at, "map key: invalid UTF-8");
            RILL_RETURN_NOT_OK(keys->AppendBytes(s, n));
            RILL_RETURN_NOT_OK(Run(p.children[0], c));
          }
        }
        return col->CloseEntry(keys->length);
      }
      case Op::kUnion: {
        const Cursor at = *c;
        RILL_RETURN_NOT_OK(avro_internal::ReadLong(c, &n));
        if (n < 0 || n >= static_cast<int64_t>(p.children.size())) {
          return BadAt(at, "union branch " + std::to_string(n) + " out of range (" +
                               std::to_string(p.children.size()) + " branches)");
        }
        return Run(p.children[static_cast<size_t>(n)], c);
      }
      case Op::kJson: {
        const Cursor at = *c;
        json_.clear();
        RILL_RETURN_NOT_OK(avro_internal::AppendJson(c, *p.w, limits_, 0, &json_));
        if (!arrow::util::ValidateUTF8(json_)) return BadAt(at, "invalid UTF-8");
        return col->AppendBytes(reinterpret_cast<const uint8_t*>(json_.data()),
                                static_cast<int64_t>(json_.size()));
      }
      case Op::kFail:
        return BadAt(*c, p.error);
    }
    return Status::OK();
  }

  Status RunInt(const Plan& p, Cursor* c) {
    const Cursor at = *c;
    int64_t v = 0;
    if (p.w->type == AvroType::kInt) {
      RILL_RETURN_NOT_OK(avro_internal::ReadInt(c, &v));
    } else {
      RILL_RETURN_NOT_OK(avro_internal::ReadLong(c, &v));
    }
    if (p.mul != 1 && __builtin_mul_overflow(v, p.mul, &v)) {
      return BadAt(at, "time value out of range of the column's unit");
    }
    if (p.div != 1) v = v >= 0 ? v / p.div : -((-(v + 1)) / p.div) - 1;  // floor
    Col* col = p.col;
    auto out_of_range = [&] {
      return BadAt(at, std::to_string(v) + " out of range of " + col->field->type()->ToString());
    };
    switch (col->kind) {
      case ColKind::kInt8:
        if (v < INT8_MIN || v > INT8_MAX) return out_of_range();
        return col->AppendValue(static_cast<int8_t>(v));
      case ColKind::kInt16:
        if (v < INT16_MIN || v > INT16_MAX) return out_of_range();
        return col->AppendValue(static_cast<int16_t>(v));
      case ColKind::kInt32:
      case ColKind::kDate32:
      case ColKind::kTime32:
        if (v < INT32_MIN || v > INT32_MAX) return out_of_range();
        return col->AppendValue(static_cast<int32_t>(v));
      case ColKind::kFloat32: return col->AppendValue(static_cast<float>(v));
      case ColKind::kFloat64: return col->AppendValue(static_cast<double>(v));
      default: return col->AppendValue(v);
    }
  }

  Status RunDecimal(const Plan& p, Cursor* c) {
    const Cursor at = *c;
    arrow::Decimal128 d;
    RILL_RETURN_NOT_OK(avro_internal::ReadDecimal(c, *p.w, limits_, &d));
    Col* col = p.col;
    if (col->kind == ColKind::kFloat64) return col->AppendValue(d.ToDouble(p.w->scale));
    if (col->kind == ColKind::kString) {
      const std::string text = d.ToString(p.w->scale);
      return col->AppendBytes(reinterpret_cast<const uint8_t*>(text.data()),
                              static_cast<int64_t>(text.size()));
    }
    if (col->scale != p.w->scale) {
      auto scaled = d.Rescale(p.w->scale, col->scale);
      if (!scaled.ok()) return BadAt(at, "decimal out of range of " + col->field->type()->ToString());
      d = *scaled;
    }
    if (!d.FitsInPrecision(col->precision)) {
      return BadAt(at, "decimal " + d.ToString(col->scale) + " does not fit " +
                           col->field->type()->ToString());
    }
    uint8_t bytes[16];
    d.ToBytes(bytes);
    return col->AppendRaw(bytes, 16);
  }

  struct Entry {
    std::shared_ptr<const AvroSchema> writer;  // keeps the plan's nodes alive
    Plan plan;
  };

  AvroDecodeOptions options_;
  arrow::MemoryPool* pool_;
  avro_internal::Limits limits_;
  std::shared_ptr<arrow::Schema> schema_;
  std::unique_ptr<Col> root_;
  int64_t rows_ = 0;
  std::unordered_map<const AvroSchema*, Entry> plans_;
  static constexpr int kMaxPath = 64;
  const std::string* path_[kMaxPath];
  int depth_ = 0;
  std::string json_;
};

Result<std::unique_ptr<AvroDecoder>> AvroDecoder::Make(AvroDecodeOptions options) {
  if (options.max_depth < 1 || options.max_value_bytes < 1) {
    return Status::Invalid("AvroDecoder: max_depth and max_value_bytes must be > 0");
  }
  arrow::util::InitializeUTF8();  // ValidateUTF8's tables (idempotent)
  auto schema = options.schema;
  auto impl = std::make_unique<Impl>(std::move(options));
  if (schema) RILL_RETURN_NOT_OK(impl->SetSchema(std::move(schema)));
  return std::unique_ptr<AvroDecoder>(new AvroDecoder(std::move(impl)));
}

AvroDecoder::AvroDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AvroDecoder::~AvroDecoder() = default;

Status AvroDecoder::Append(const std::shared_ptr<const AvroSchema>& writer,
                           std::string_view data, int64_t base_offset, int64_t* consumed) {
  return impl_->Append(writer, data, base_offset, consumed);
}

int64_t AvroDecoder::num_rows() const { return impl_->num_rows(); }

Result<std::shared_ptr<arrow::RecordBatch>> AvroDecoder::Flush() { return impl_->Flush(); }

Status AvroDecoder::SetSchema(std::shared_ptr<arrow::Schema> schema) {
  if (!schema) return Status::Invalid("AvroDecoder: null schema");
  return impl_->SetSchema(std::move(schema));
}

std::shared_ptr<arrow::Schema> AvroDecoder::schema() const { return impl_->schema(); }

Result<ConfluentFrame> ParseConfluentFrame(std::string_view value) {
  if (value.size() < 5) {
    return Status::Invalid("not in the Confluent wire format: ", value.size(),
                           " bytes, fewer than the 5-byte header");
  }
  if (value[0] != 0) {
    return Status::Invalid("not in the Confluent wire format: magic byte ",
                           static_cast<int>(static_cast<uint8_t>(value[0])), ", expected 0");
  }
  const auto* p = reinterpret_cast<const uint8_t*>(value.data());
  ConfluentFrame f;
  f.schema_id = static_cast<int32_t>((uint32_t{p[1]} << 24) | (uint32_t{p[2]} << 16) |
                                     (uint32_t{p[3]} << 8) | uint32_t{p[4]});
  f.body = value.substr(5);
  return f;
}

void AppendConfluentHeader(int32_t schema_id, std::string* out) {
  const auto id = static_cast<uint32_t>(schema_id);
  out->push_back('\0');
  out->push_back(static_cast<char>(id >> 24));
  out->push_back(static_cast<char>(id >> 16));
  out->push_back(static_cast<char>(id >> 8));
  out->push_back(static_cast<char>(id));
}

}  // namespace rill
