#include "rill/connector/json_decoder.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_map>

#include <arrow/array/util.h>
#include <arrow/builder.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>

#include "rill/connector/change_envelope_internal.h"
#include "rill/connector/json_columns_internal.h"

namespace rill {

using json_internal::Cell;
using json_internal::ChangeEnvelope;
using json_internal::ColumnWriter;
using json_internal::OpCode;
using json_internal::ColKind;
using json_internal::ColumnSpec;
using json_internal::JsonErrorMessage;
using json_internal::JsonScalar;
namespace ondemand = simdjson::ondemand;
using simdjson::error_code;

Result<JsonFormat> ParseJsonFormat(std::string_view name) {
  if (name == "json" || name == "ndjson") return JsonFormat::kJson;
  if (name == "debezium") return JsonFormat::kDebezium;
  return Status::Invalid("unknown format '", std::string(name),
                         "' (expected json, ndjson or debezium)");
}

const char* JsonFormatName(JsonFormat format) {
  return format == JsonFormat::kDebezium ? "debezium" : "json";
}

std::string TruncateRaw(std::string_view raw, int64_t max_bytes) {
  if (max_bytes < 0 || static_cast<int64_t>(raw.size()) <= max_bytes) return std::string(raw);
  return std::string(raw.substr(0, static_cast<size_t>(max_bytes)));
}

namespace {

bool IsNested(ColKind kind) {
  return kind == ColKind::kStruct || kind == ColKind::kList || kind == ColKind::kMap;
}

bool IsBlank(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return false;
  }
  return true;
}

/// Types seen for one field while inferring a schema.
enum class Seen { kNone, kNull, kBool, kInt, kDouble, kString, kText };

Seen Merge(Seen a, Seen b) {
  if (a == b || b == Seen::kNull) return a == Seen::kNone ? b : a;
  if (a == Seen::kNone || a == Seen::kNull) return b;
  if ((a == Seen::kInt && b == Seen::kDouble) || (a == Seen::kDouble && b == Seen::kInt)) {
    return Seen::kDouble;
  }
  return Seen::kText;
}

std::shared_ptr<arrow::DataType> SeenType(Seen s) {
  switch (s) {
    case Seen::kBool: return arrow::boolean();
    case Seen::kInt: return arrow::int64();
    case Seen::kDouble: return arrow::float64();
    default: return arrow::utf8();
  }
}

}  // namespace

class JsonDecoder::Impl {
 public:
  explicit Impl(JsonDecodeOptions options) : options_(std::move(options)) {
#ifdef SIMDJSON_THREADS_ENABLED
    stream_parser_.threaded = false;  // the decoding thread runs every stage 1
#endif
  }

  Status SetSchema(std::shared_ptr<arrow::Schema> schema) {
    if (schema) {
      RILL_ASSIGN_OR_RAISE(schema, ColumnsOf(schema));  // checked before any change
    }
    specs_.clear();
    index_.clear();
    writers_.clear();
    op_builder_.Reset();
    op_index_ = ts_index_ = -1;
    if (!schema) {
      schema_ = batch_schema_ = nullptr;
      return Status::OK();
    }
    for (const auto& f : schema->fields()) specs_.push_back(json_internal::MakeSpec(*f));
    schema_ = json_internal::SpecSchema(specs_);
    batch_schema_ = schema_;
    num_columns_ = specs_.size();
    if (!options_.ts_ms_column.empty()) ts_index_ = schema_->GetFieldIndex(options_.ts_ms_column);
    if (options_.has_row_ops()) {
      RILL_ASSIGN_OR_RAISE(batch_schema_,
                           schema_->AddField(schema_->num_fields(),
                                             arrow::field(json_internal::kOpColumn, arrow::int8(),
                                                          /*nullable=*/false)));
    }
    if (!options_.op_column.empty()) {
      // The op field is read like a utf8 column (any JSON value as its text)
      // into op_cell_; it has no writer.
      op_index_ = static_cast<int>(specs_.size());
      specs_.push_back(json_internal::MakeSpec(*arrow::field(options_.op_column, arrow::utf8())));
      specs_.back().any_as_text = true;
    }
    for (size_t i = 0; i < specs_.size(); ++i) {
      index_[specs_[i].name] = static_cast<int>(i);  // views into specs_, which stay put
      if (i < num_columns_) writers_.push_back(json_internal::MakeColumnWriter(specs_[i]));
    }
    seen_.assign(specs_.size(), 0);
    generation_ = 0;
    row_capacity_ = 0;
    predicted_.assign(specs_.size() + 1, -1);
    return Status::OK();
  }

  std::shared_ptr<arrow::Schema> schema() const { return schema_; }

  /// The columns the decoder fills for `schema`: without "_rill_op" and the
  /// op_column, with the ts_ms_column (added as timestamp[ms, UTC] when
  /// missing). Invalid for a ts_ms_column of another type.
  Result<std::shared_ptr<arrow::Schema>> ColumnsOf(const std::shared_ptr<arrow::Schema>& schema) {
    std::vector<std::shared_ptr<arrow::Field>> fields;
    for (const auto& f : schema->fields()) {
      if (f->name() == json_internal::kOpColumn ||
          (!options_.op_column.empty() && f->name() == options_.op_column)) {
        continue;
      }
      fields.push_back(f);
    }
    const std::string& ts = options_.ts_ms_column;
    if (!ts.empty()) {
      auto it = std::find_if(fields.begin(), fields.end(),
                             [&](const auto& f) { return f->name() == ts; });
      if (it == fields.end()) {
        fields.push_back(arrow::field(ts, arrow::timestamp(arrow::TimeUnit::MILLI, "UTC")));
      } else if ((*it)->type()->id() != arrow::Type::TIMESTAMP &&
                 !arrow::is_integer((*it)->type()->id())) {
        return Status::Invalid("ts_ms_column '", ts, "' has type ", (*it)->type()->ToString(),
                               ": it takes source.ts_ms into a timestamp or an integer "
                               "(milliseconds) column");
      }
    }
    return arrow::schema(std::move(fields), schema->metadata());
  }

  Result<DecodeResult> Decode(std::string_view data, const JsonInputPosition& where) {
    size_t first = 0;
    while (first < data.size() && (data[first] == ' ' || data[first] == '\t' ||
                                   data[first] == '\r' || data[first] == '\n')) {
      ++first;
    }
    bool is_array = first < data.size() && data[first] == '[';
    // simdjson reads up to SIMDJSON_PADDING bytes past a document: records
    // are read from a padded copy. Large NDJSON inputs by a known schema are
    // read in place, except for their lines within SIMDJSON_PADDING of the
    // end, which alone are copied.
    size_t copy_from = 0;
    const bool in_place = schema_ && !is_array && options_.format == JsonFormat::kJson &&
                          data.size() >= kInPlaceBytes;
    if (in_place) {
      size_t nl = data.rfind('\n', data.size() - simdjson::SIMDJSON_PADDING - 1);
      copy_from = nl == std::string_view::npos ? 0 : nl + 1;
    }
    const size_t copy_size = data.size() - copy_from;
    buffer_.resize(copy_size + simdjson::SIMDJSON_PADDING);
    if (copy_size > 0) std::memcpy(buffer_.data(), data.data() + copy_from, copy_size);
    std::memset(buffer_.data() + copy_size, 0, simdjson::SIMDJSON_PADDING);
    base_ = in_place ? data.data() : buffer_.data();
    end_ = base_ + data.size();
    copy_ = buffer_.data();
    copy_end_ = copy_ + copy_size;
    copy_origin_ = base_ + copy_from;
    where_ = &where;
    result_ = DecodeResult{};
    line_cursor_ = base_;
    line_at_cursor_ = where.first_line;
    rows_ = 0;

    RILL_RETURN_NOT_OK(ReserveFor(data.size()));
    if (!schema_) {
      RILL_RETURN_NOT_OK(is_array ? InferArray(first) : InferNdjson());
      if (!schema_) {
        // Nothing decodable: every record is a reject (or there were none).
        RILL_RETURN_NOT_OK(SetSchema(arrow::schema({})));
      }
    }
    if (is_array) {
      RILL_RETURN_NOT_OK(DecodeArray(first));
    } else {
      RILL_RETURN_NOT_OK(DecodeNdjson());
    }
    if (rows_ > 0) {
      avg_record_bytes_ = std::max<int64_t>(16, static_cast<int64_t>(data.size()) / rows_);
      std::vector<std::shared_ptr<arrow::Array>> columns;
      for (ColumnWriter& w : writers_) {
        RILL_ASSIGN_OR_RAISE(auto column, json_internal::FinishColumn(
                                              &w, rows_, static_cast<double>(data.size())));
        columns.push_back(arrow::MakeArray(std::move(column)));
      }
      row_capacity_ = 0;
      if (options_.has_row_ops()) {
        columns.emplace_back();
        RILL_RETURN_NOT_OK(op_builder_.Finish(&columns.back()));
      }
      result_.batch = arrow::RecordBatch::Make(batch_schema_, rows_, std::move(columns));
    } else {
      op_builder_.Reset();
    }
    return std::move(result_);
  }

 private:
  /// Call fn(record, record_offset) for every non-blank line.
  template <typename Fn>
  Status ForEachLine(Fn&& fn) {
    const char* p = base_;
    while (p < end_) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', end_ - p));
      const char* line_end = nl ? nl : end_;
      std::string_view line(p, line_end - p);
      if (!IsBlank(line)) RILL_RETURN_NOT_OK(fn(line));
      p = nl ? nl + 1 : end_;
    }
    return Status::OK();
  }

  /// Inputs are decoded in regions of at most this many bytes (whole lines),
  /// each by one simdjson document stream of this batch size: the stream
  /// parser's capacity, allocated once.
  static constexpr size_t kStreamBatch = 1 << 20;
  /// Regions smaller than this are decoded line by line.
  static constexpr size_t kMinStreamBytes = 1024;
  /// NDJSON inputs from this size on are read in place (see Decode).
  static constexpr size_t kInPlaceBytes = 64 << 10;

  Status DecodeNdjson() {
    if (options_.format != JsonFormat::kJson) {
      return ForEachLine([&](std::string_view line) { return DecodeOne(line); });
    }
    RILL_RETURN_NOT_OK(DecodeRegions(base_, copy_origin_));  // in place (or nothing)
    return DecodeRegions(copy_, copy_end_);
  }

  /// Decode the lines of [p, end) region by region.
  Status DecodeRegions(const char* p, const char* end) {
    while (p < end) {
      const char* b = end;
      if (static_cast<size_t>(end - p) > kStreamBatch) {
        const char* nl = static_cast<const char*>(memrchr(p, '\n', kStreamBatch));
        if (nl == nullptr) {
          // A line longer than a stream batch: on its own.
          const char* limit = p + kStreamBatch;
          nl = static_cast<const char*>(std::memchr(limit, '\n', end - limit));
          b = nl ? nl + 1 : end;
          RILL_RETURN_NOT_OK(DecodeLines(p, b));
          p = b;
          continue;
        }
        b = nl + 1;
      }
      RILL_RETURN_NOT_OK(DecodeRegion(p, b));
      p = b;
    }
    return Status::OK();
  }

  /// Where the bytes at `p` (in the input, or in its padded copy) are in the input.
  const char* Origin(const char* p) const {
    return p >= copy_ && p <= copy_end_ ? copy_origin_ + (p - copy_) : p;
  }

  /// How many bytes simdjson may read from `p` on: to the copy's padding, or,
  /// in the input, to its end (lines read in place end SIMDJSON_PADDING before).
  size_t Capacity(const char* p) const {
    return static_cast<size_t>(
        p >= copy_ && p <= copy_end_ ? copy_end_ + simdjson::SIMDJSON_PADDING - p : end_ - p);
  }

  /// Decode the lines of [a, b) one by one (DecodeOne each).
  Status DecodeLines(const char* a, const char* b) {
    while (a < b) {
      const char* nl = static_cast<const char*>(std::memchr(a, '\n', b - a));
      const char* line_end = nl ? nl : b;
      std::string_view line(a, line_end - a);
      if (!IsBlank(line)) RILL_RETURN_NOT_OK(DecodeOne(line));
      a = nl ? nl + 1 : b;
    }
    return Status::OK();
  }

  /// Decode the whole lines of [a, b) with simdjson document streams. A line
  /// the stream does not decode exactly as DecodeOne would (a bad record, or
  /// bytes the stream splits into documents otherwise than into lines) is
  /// decoded by DecodeOne instead, and the lines after it by new streams over
  /// the two halves of the rest: a bad line costs its region's stage 1 again,
  /// and many bad lines at most O(log) passes before regions fall below
  /// kMinStreamBytes and go line by line.
  Status DecodeRegion(const char* a, const char* b) {
    while (a < b) {
      if (static_cast<size_t>(b - a) < kMinStreamBytes) return DecodeLines(a, b);
      const char* resume = nullptr;
      RILL_RETURN_NOT_OK(StreamLines(a, b, &resume));
      if (resume == nullptr || resume >= b) return Status::OK();
      const char* mid = resume + (b - resume) / 2;
      const char* nl = static_cast<const char*>(std::memchr(mid, '\n', b - mid));
      mid = nl ? nl + 1 : b;
      RILL_RETURN_NOT_OK(DecodeRegion(resume, mid));
      a = mid;
    }
    return Status::OK();
  }

  /// The start of the first non-blank line at or after `p` (a line start)
  /// before `b`, and in `*first` its first non-blank byte; `b` when none.
  static const char* NextRecordLine(const char* p, const char* b, const char** first) {
    const char* line = p;
    for (const char* q = p; q < b; ++q) {
      const char c = *q;
      if (c == '\n') {
        line = q + 1;
      } else if (c != ' ' && c != '\t' && c != '\r') {
        *first = q;
        return line;
      }
    }
    return b;
  }

  /// Decode lines of [a, b) from one document stream, each document checked
  /// to be exactly one line. At the first line that is not decoded so,
  /// decode it with DecodeOne and set `*resume` to the line after it.
  Status StreamLines(const char* a, const char* b, const char** resume) {
    *resume = nullptr;
    const char* first = nullptr;
    const char* line = NextRecordLine(a, b, &first);
    if (line >= b) return Status::OK();
    ondemand::document_stream stream;
    if (!stream_parser_.iterate_many(a, b - a, kStreamBatch).get(stream)) {
      for (auto it = stream.begin(); it != stream.end() && line < b; ++it) {
        const char* nl = static_cast<const char*>(std::memchr(line, '\n', b - line));
        const char* line_end = nl ? nl : b;
        ondemand::document_reference doc;
        bool decoded = false;
        if (!(*it).get(doc) && a + it.current_index() == first) {
          RILL_ASSIGN_OR_RAISE(
              decoded, DecodeStreamed(doc, std::string_view(line, line_end - line), b));
        }
        if (!decoded) break;
        line = NextRecordLine(nl ? nl + 1 : b, b, &first);
      }
      if (line >= b) return Status::OK();
    }
    const char* nl = static_cast<const char*>(std::memchr(line, '\n', b - line));
    RILL_RETURN_NOT_OK(DecodeOne(std::string_view(line, (nl ? nl : b) - line)));
    *resume = nl ? nl + 1 : b;
    return Status::OK();
  }

  /// Decode the stream's current document, which starts `record` (a line of
  /// a region ending at `region_end`), as DecodeOne would decode `record`.
  /// False, with nothing changed, when it cannot be told so: the document
  /// does not convert, or it is not exactly the line (it goes on past the
  /// line's end, or the line holds more): DecodeOne decides then.
  Result<bool> DecodeStreamed(ondemand::document_reference& doc, std::string_view record,
                              const char* region_end) {
    if (static_cast<int64_t>(record.size()) > options_.max_record_bytes) return false;
    const int64_t unknown_fields = result_.unknown_fields;
    const bool required = op_index_ < 0;
    OpCode op = OpCode::kUpsert;
    Status st = ParseFields(doc, required);
    if (st.ok()) {
      // The next token must come after the line's end, and only whitespace
      // between: the document's last token (a '}') then lies on the line.
      const char* line_end = record.data() + record.size();
      auto loc = doc.current_location();
      const char* next = loc.error() == simdjson::OUT_OF_BOUNDS ? region_end
                         : loc.error()                         ? nullptr
                                                               : loc.value_unsafe();
      if (next == nullptr || next <= line_end ||
          !IsBlank(std::string_view(line_end, next - line_end))) {
        st = Status::Invalid("not one line");
      }
    }
    if (st.ok()) st = CheckMissing(required);
    if (st.ok() && op_index_ >= 0) st = ReadOpField(&op);
    if (st.ok() && op_index_ >= 0 && op == OpCode::kUpsert) st = CheckRequired();
    if (!st.ok()) {
      result_.unknown_fields = unknown_fields;
      return false;
    }
    ++result_.records;
    RILL_RETURN_NOT_OK(Commit(record, op));
    return true;
  }

  /// Decode one record (a view into buffer_); a bad one becomes a reject.
  Status DecodeOne(std::string_view record) {
    ++result_.records;
    Status bad;
    OpCode op = OpCode::kUpsert;
    if (static_cast<int64_t>(record.size()) > options_.max_record_bytes) {
      bad = Status::Invalid("record of ", record.size(), " bytes exceeds the limit of ",
                            options_.max_record_bytes, " bytes");
    } else if (options_.format == JsonFormat::kDebezium) {
      bad = ParseChange(record, &op);
    } else {
      // With an op_column, required columns are checked once the op says
      // the row is an upsert (a delete needs only the key).
      bad = ParseRecord(record, /*required=*/op_index_ < 0);
      if (bad.ok() && op_index_ >= 0) bad = ReadOpField(&op);
      if (bad.ok() && op_index_ >= 0 && op == OpCode::kUpsert) bad = CheckRequired();
    }
    if (!bad.ok()) {
      Reject(record, bad.message());
      return Status::OK();
    }
    return Commit(record, op);
  }

  /// Count the record just parsed (written at row rows_) as a row: its
  /// missing fields become nulls.
  Status Commit(std::string_view record, OpCode op) {
    RILL_RETURN_NOT_OK(EnsureRow());
    if (options_.has_row_ops()) RILL_RETURN_NOT_OK(op_builder_.Append(static_cast<int8_t>(op)));
    for (size_t i = 0; columns_seen_ < num_columns_ && i < num_columns_; ++i) {
      if (seen_[i] != generation_) RILL_RETURN_NOT_OK(json_internal::WriteNull(writers_[i], rows_));
    }
    if (options_.row_offsets) result_.row_offsets.push_back(Origin(record.data()) - base_);
    ++rows_;
    return Status::OK();
  }

  /// Size the columns for what `bytes` of input probably hold, going by the
  /// last decode, so that they do not grow by doubling (copying, and touching
  /// fresh memory twice) during the decode.
  Status ReserveFor(size_t bytes) {
    const double n = static_cast<double>(bytes) * 1.05;
    const int64_t rows = static_cast<int64_t>(bytes) / avg_record_bytes_ + 1;
    for (ColumnWriter& w : writers_) RILL_RETURN_NOT_OK(json_internal::ReserveColumn(&w, n, rows));
    if (options_.has_row_ops()) RILL_RETURN_NOT_OK(op_builder_.Reserve(rows));
    row_capacity_ = RowCapacity();
    return Status::OK();
  }

  /// The rows every column can hold.
  int64_t RowCapacity() const {
    int64_t capacity = std::numeric_limits<int64_t>::max();
    for (const ColumnWriter& w : writers_) capacity = std::min(capacity, w.capacity);
    return capacity;
  }

  /// Start the next record: no column seen.
  void NextRecord() {
    ++generation_;
    columns_seen_ = 0;
  }

  /// Make every column hold row rows_.
  Status EnsureRow() {
    if (rows_ < row_capacity_) return Status::OK();
    for (ColumnWriter& w : writers_) RILL_RETURN_NOT_OK(json_internal::EnsureIndex(w, rows_));
    row_capacity_ = RowCapacity();
    return Status::OK();
  }

  int Lookup(std::string_view key, size_t ordinal) {
    auto it = index_.find(key);
    int col = it == index_.end() ? -1 : it->second;
    if (ordinal < predicted_.size()) predicted_[ordinal] = col;
    return col;
  }

  /// The column of `field` (-1: not in the schema; `*key` then holds its
  /// name). Records usually list fields in the same order, so the raw key is
  /// first compared with the column the same ordinal had in the last record,
  /// without unescaping it; `*key` is set only when that guess fails.
  simdjson::error_code FindColumn(ondemand::field& field, size_t ordinal, int* col,
                                  std::string_view* key) {
    if (ordinal < predicted_.size()) {
      int guess = predicted_[ordinal];
      if (guess >= 0 && json_internal::RawKeyIs(field.key().raw(), specs_[guess])) {
        *col = guess;
        return simdjson::SUCCESS;
      }
    }
    error_code err = field.unescaped_key().get(*key);
    if (err) return err;
    *col = Lookup(*key, ordinal);
    return simdjson::SUCCESS;
  }



  /// Write the value of nested column `col` when it has the column's shape
  /// (`*written`); leave nulls and other shapes unconsumed for Convert, which
  /// explains the mismatch.
  Status WriteNested(ondemand::value& value, int col, bool* written) {
    ondemand::json_type type;
    if (value.type().get(type)) return Status::OK();  // Convert reports it
    const bool shape = specs_[col].kind == ColKind::kList
                           ? type == ondemand::json_type::array
                           : type == ondemand::json_type::object;
    if (!shape) return Status::OK();
    Status st = json_internal::WriteNested(value, writers_[col], rows_);
    if (!st.ok()) return FieldError(specs_[col].name, st);
    *written = true;
    return Status::OK();
  }

  static Status FieldError(std::string_view key, const Status& st) {
    // Nested errors start with their path below the field: ".a[2]: …".
    std::string_view msg = st.message();
    size_t colon = msg.find(": ");
    if (!msg.empty() && (msg[0] == '.' || msg[0] == '[') && colon != msg.npos) {
      return Status::Invalid("field '", key, msg.substr(0, colon), "'", msg.substr(colon));
    }
    return Status::Invalid("field '", key, "': ", msg);
  }

  /// Parse the Debezium change event `record`: its row into row rows_ (nothing
  /// for a truncate), source.ts_ms into the ts_ms_column, its op into `*op`.
  Status ParseChange(std::string_view record, OpCode* op) {
    ChangeEnvelope change;
    size_t capacity = Capacity(record.data());
    RILL_RETURN_NOT_OK(
        json_internal::ParseDebeziumEnvelope(&envelope_parser_, record, capacity, &change));
    *op = change.op;
    if (change.op == OpCode::kTruncate) {
      NextRecord();  // every column null
    } else {
      // A delete needs only the key: the other columns may be missing or null.
      Status st = ParseRecord(change.row, /*required=*/change.op == OpCode::kUpsert);
      if (!st.ok()) {
        return Status::Invalid(change.op == OpCode::kDelete ? "'before': " : "'after': ",
                               st.message());
      }
    }
    if (ts_index_ >= 0 && change.has_ts) return SetTsMs(change.ts_ms);
    return Status::OK();
  }

  /// Put source.ts_ms into the ts_ms_column's cell (a timestamp in its unit,
  /// or milliseconds in an integer column).
  Status SetTsMs(int64_t ms) {
    const json_internal::ColumnSpec& spec = specs_[ts_index_];
    int64_t value = ms;
    bool overflow = false;
    if (spec.kind == ColKind::kTimestamp) {
      switch (static_cast<arrow::TimeUnit::type>(spec.unit)) {
        case arrow::TimeUnit::SECOND:
          value = ms / 1000 - (ms % 1000 < 0 ? 1 : 0);
          break;
        case arrow::TimeUnit::MICRO:
          overflow = __builtin_mul_overflow(ms, int64_t{1000}, &value);
          break;
        case arrow::TimeUnit::NANO:
          overflow = __builtin_mul_overflow(ms, int64_t{1000000}, &value);
          break;
        default:
          break;
      }
    }
    if (overflow) {
      return Status::Invalid("source.ts_ms ", ms, " out of range for ", spec.type->ToString());
    }
    JsonScalar scalar;
    scalar.type = JsonScalar::kInt;
    scalar.i = value;
    Cell cell;
    Status st = json_internal::Convert(scalar, spec, &cell);
    if (!st.ok()) return Status::Invalid("source.ts_ms: ", st.message());
    RILL_RETURN_NOT_OK(EnsureRow());
    if (seen_[ts_index_] != generation_) ++columns_seen_;
    seen_[ts_index_] = generation_;
    return json_internal::WriteCell(writers_[ts_index_], rows_, cell);
  }

  /// Invalid when a non-nullable column of the record just parsed is missing
  /// or null.
  Status CheckRequired() const {
    for (size_t i = 0; i < num_columns_; ++i) {
      if (specs_[i].nullable) continue;
      if (seen_[i] != generation_) {
        return Status::Invalid("missing field '", specs_[i].name, "' (non-nullable)");
      }
      if (!json_internal::IsValid(writers_[i], rows_)) {
        return Status::Invalid("field '", specs_[i].name, "': null in a non-nullable column");
      }
    }
    return Status::OK();
  }

  /// The operation in the op_column field of the record just parsed.
  Status ReadOpField(OpCode* op) {
    const Cell& cell = op_cell_;
    if (seen_[op_index_] != generation_ || cell.null) return Status::OK();  // upsert
    auto parsed = ParseRowOp(cell.s);
    if (!parsed.ok()) {
      return Status::Invalid("field '", options_.op_column, "': ", parsed.status().message());
    }
    *op = *parsed;
    return Status::OK();
  }

  /// Parse `record` into row rows_ (seen_ marks what it set). Invalid with
  /// the reason when the record cannot be decoded; `required`: also when a
  /// non-nullable column is missing or null.
  Status ParseRecord(std::string_view record, bool required) {
    size_t capacity = Capacity(record.data());
    ondemand::document doc;
    error_code err = parser_.iterate(record.data(), record.size(), capacity).get(doc);
    if (err) {
      NextRecord();
      return Status::Invalid(JsonErrorMessage(err));
    }
    RILL_RETURN_NOT_OK(ParseFields(doc, required));
    if (doc.current_location().error() == simdjson::SUCCESS) {
      return Status::Invalid("unexpected content after the object");
    }
    return CheckMissing(required);
  }

  /// Invalid when `required` and a non-nullable column is missing from the
  /// record just parsed.
  Status CheckMissing(bool required) const {
    for (size_t i = 0; required && i < specs_.size(); ++i) {
      if (!specs_[i].nullable && seen_[i] != generation_) {
        return Status::Invalid("missing field '", specs_[i].name, "' (non-nullable)");
      }
    }
    return Status::OK();
  }

  /// Read the object `doc` (a document, or a document of a stream) into row
  /// rows_ of the columns (and op_cell_), up to its closing brace.
  template <typename Doc>
  Status ParseFields(Doc& doc, bool required) {
    NextRecord();
    RILL_RETURN_NOT_OK(EnsureRow());
    auto object = doc.get_object();
    error_code err = object.error();
    if (err == simdjson::INCORRECT_TYPE) return Status::Invalid("expected a JSON object");
    if (err) return Status::Invalid(JsonErrorMessage(err));
    ondemand::object& obj = object.value_unsafe();
    size_t ordinal = 0;
    for (auto field_result : obj) {
      std::string_view key;
      int col = -1;
      if ((err = field_result.error())) return Status::Invalid(JsonErrorMessage(err));
      // By reference: a copy of the field just built stalls on store forwarding.
      ondemand::field& field = field_result.value_unsafe();
      if ((err = FindColumn(field, ordinal++, &col, &key))) {
        return Status::Invalid(JsonErrorMessage(err));
      }
      if (col < 0) {
        if (options_.unknown_fields == UnknownFieldPolicy::kReject) {
          return Status::Invalid("unknown field '", key, "'");
        }
        ++result_.unknown_fields;
        continue;  // On-Demand skips the value
      }
      key = specs_[col].name;
      if (seen_[col] == generation_) return Status::Invalid("duplicate field '", key, "'");
      seen_[col] = generation_;
      JsonScalar scalar;
      const bool is_column = static_cast<size_t>(col) < num_columns_;
      if (is_column) {
        ++columns_seen_;
        bool written = false;
        RILL_RETURN_NOT_OK(
            json_internal::WriteTyped(field.value(), writers_[col], rows_, &scalar, &written));
        if (written) continue;
        // A null (unless a temporal string was consumed): is_null consumes
        // nothing unless it is one.
        bool is_null = false;
        if (scalar.type != JsonScalar::kString && !field.value().is_null().get(is_null) &&
            is_null) {
          if (!specs_[col].nullable && required) {
            return Status::Invalid("field '", key, "': null in a non-nullable column");
          }
          RILL_RETURN_NOT_OK(json_internal::WriteNull(writers_[col], rows_));
          continue;
        }
        if (IsNested(specs_[col].kind)) {
          RILL_RETURN_NOT_OK(WriteNested(field.value(), col, &written));
          if (written) continue;
        }
      }
      if (scalar.type != JsonScalar::kString &&
          (err = json_internal::ReadScalar(field.value(), &scalar))) {
        return Status::Invalid("field '", key, "': ", JsonErrorMessage(err));
      }
      const ColumnSpec& spec = specs_[col];
      Cell cell;
      Status st = json_internal::Convert(scalar, spec, &cell);
      if (!st.ok()) return FieldError(key, st);
      if (cell.null && !spec.nullable && required) {
        return Status::Invalid("field '", key, "': null in a non-nullable column");
      }
      if (is_column) {
        RILL_RETURN_NOT_OK(json_internal::WriteCell(writers_[col], rows_, cell));
      } else {
        op_cell_ = cell;
      }
    }
    return Status::OK();
  }

  /// Decode a top-level array: each element is a record. After a syntax error
  /// the rest of the array is one reject.
  Status DecodeArray(size_t first) {
    return ForEachElement(first, [&](std::string_view element) { return DecodeOne(element); });
  }

  template <typename Fn>
  Status ForEachElement(size_t first, Fn&& fn) {
    ondemand::document doc;
    std::string_view all(base_ + first, end_ - base_ - first);
    error_code err = array_parser_.iterate(all.data(), all.size(), all.size() +
                                           simdjson::SIMDJSON_PADDING).get(doc);
    ondemand::array arr;
    if (!err) err = doc.get_array().get(arr);
    if (err) {
      ++result_.records;
      Reject(all, JsonErrorMessage(err));
      return Status::OK();
    }
    const char* last_end = all.data();
    for (auto item : arr) {
      ondemand::value value;
      JsonScalar scalar;
      err = item.get(value);
      const char* start = nullptr;
      if (!err) {
        auto loc = value.current_location();
        start = loc.error() ? nullptr : loc.value_unsafe();
        err = json_internal::ReadScalar(value, &scalar);
      }
      if (err) {
        ++result_.records;
        std::string_view rest(start ? start : last_end, end_ - (start ? start : last_end));
        Reject(rest, JsonErrorMessage(err));
        return Status::OK();
      }
      if (scalar.type != JsonScalar::kObject) {
        ++result_.records;
        std::string_view raw = scalar.type == JsonScalar::kString && start
                                   ? std::string_view(start, scalar.text.size() + 2)
                                   : scalar.text;
        Reject(raw, "expected a JSON object, " + json_internal::Describe(scalar));
        continue;
      }
      last_end = scalar.text.data() + scalar.text.size();
      RILL_RETURN_NOT_OK(fn(scalar.text));
    }
    if (doc.current_location().error() == simdjson::SUCCESS) {
      ++result_.records;
      Reject(std::string_view(last_end, end_ - last_end), "unexpected content after the array");
    }
    return Status::OK();
  }

  /// Infer the schema from the first records (bad ones are skipped here and
  /// rejected by the decode that follows).
  Status InferNdjson() {
    int64_t seen = 0;
    auto st = ForEachLine([&](std::string_view line) {
      if (seen++ < options_.infer_records &&
          static_cast<int64_t>(line.size()) <= options_.max_record_bytes) {
        InferAny(line);
      }
      return Status::OK();
    });
    RILL_RETURN_NOT_OK(st);
    return FinishInference();
  }

  Status InferArray(size_t first) {
    // Inference walks the array with array_parser_; records are parsed with parser_.
    int64_t seen = 0;
    DecodeResult saved = std::move(result_);
    result_ = DecodeResult{};
    RILL_RETURN_NOT_OK(ForEachElement(first, [&](std::string_view element) {
      if (seen++ < options_.infer_records) InferAny(element);
      return Status::OK();
    }));
    result_ = std::move(saved);
    return FinishInference();
  }

  /// Infer from a record: the row of a change event (its `after`, or a
  /// delete's `before`), else the record itself.
  void InferAny(std::string_view record) {
    if (options_.format != JsonFormat::kDebezium) return InferRecord(record);
    ChangeEnvelope change;
    size_t capacity = Capacity(record.data());
    if (json_internal::ParseDebeziumEnvelope(&envelope_parser_, record, capacity, &change)
            .ok() &&
        change.op != OpCode::kTruncate) {
      InferRecord(change.row);
    }
  }

  void InferRecord(std::string_view record) {
    size_t capacity = Capacity(record.data());
    ondemand::document doc;
    ondemand::object obj;
    if (parser_.iterate(record.data(), record.size(), capacity).get(doc) ||
        doc.get_object().get(obj)) {
      return;
    }
    std::vector<std::pair<std::string, Seen>> fields;
    for (auto field_result : obj) {
      ondemand::field field;
      std::string_view key;
      ondemand::json_type type;
      if (std::move(field_result).get(field) || field.unescaped_key().get(key) ||
          field.value().type().get(type)) {
        return;  // a bad record contributes nothing
      }
      Seen s = Seen::kText;
      switch (type) {
        case ondemand::json_type::null: s = Seen::kNull; break;
        case ondemand::json_type::boolean: s = Seen::kBool; break;
        case ondemand::json_type::string: s = Seen::kString; break;
        case ondemand::json_type::number: {
          ondemand::number_type nt;
          if (field.value().get_number_type().get(nt)) return;
          s = nt == ondemand::number_type::signed_integer ? Seen::kInt : Seen::kDouble;
          break;
        }
        default: s = Seen::kText;
      }
      fields.emplace_back(std::string(key), s);
    }
    for (auto& [key, s] : fields) {
      auto it = inferred_index_.find(key);
      if (it == inferred_index_.end()) {
        inferred_index_[key] = inferred_.size();
        inferred_.emplace_back(key, s);
      } else {
        inferred_[it->second].second = Merge(inferred_[it->second].second, s);
      }
    }
  }

  Status FinishInference() {
    if (inferred_.empty()) return Status::OK();
    std::vector<std::shared_ptr<arrow::Field>> fields;
    std::vector<bool> as_text;
    for (const auto& [name, s] : inferred_) {
      if (name == json_internal::kOpColumn || name == options_.op_column) continue;
      fields.push_back(arrow::field(name, SeenType(s)));
      as_text.push_back(s == Seen::kText);
    }
    RILL_RETURN_NOT_OK(SetSchema(arrow::schema(std::move(fields))));
    for (size_t i = 0; i < as_text.size(); ++i) specs_[i].any_as_text = as_text[i];
    inferred_.clear();
    inferred_index_.clear();
    return Status::OK();
  }

  void Reject(std::string_view raw, std::string error) {
    raw = std::string_view(Origin(raw.data()), raw.size());
    int64_t offset = raw.data() - base_;
    // Lines are counted incrementally: rejects come in input order.
    const char* target = raw.data();
    if (target < line_cursor_) {
      line_cursor_ = base_;
      line_at_cursor_ = where_->first_line;
    }
    for (const char* p = line_cursor_; p < target;) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', target - p));
      if (!nl) break;
      ++line_at_cursor_;
      p = nl + 1;
    }
    line_cursor_ = target;
    RejectedRecord r;
    r.position = where_->prefix + "line " + std::to_string(line_at_cursor_) + ", byte " +
                 std::to_string(where_->base_offset + offset);
    r.error = std::move(error);
    r.raw = TruncateRaw(raw, options_.max_raw_bytes);
    r.raw_size = static_cast<int64_t>(raw.size());
    r.byte_offset = where_->base_offset + offset;
    result_.rejects.push_back(std::move(r));
  }

  JsonDecodeOptions options_;
  std::shared_ptr<arrow::Schema> schema_;
  /// schema_, then kOpColumn when the batches carry row operations.
  std::shared_ptr<arrow::Schema> batch_schema_;
  /// The columns (then, with an op_column, the op field's spec).
  std::vector<ColumnSpec> specs_;
  size_t num_columns_ = 0;  ///< specs_ that are columns (each has a builder)
  int op_index_ = -1;       ///< the op_column's spec, -1: none
  int ts_index_ = -1;       ///< the ts_ms_column's spec, -1: none
  arrow::Int8Builder op_builder_;
  std::unordered_map<std::string_view, int> index_;
  /// Per column: its buffers; the record being decoded writes row rows_.
  std::vector<ColumnWriter> writers_;
  int64_t row_capacity_ = 0;  ///< rows every writer holds
  /// Per spec: the record (generation_) that last set it; others are missing.
  std::vector<uint32_t> seen_;
  size_t columns_seen_ = 0;  ///< columns the record being decoded set
  Cell op_cell_;  ///< the op_column field of the record being decoded
  std::vector<int> predicted_;
  uint32_t generation_ = 0;
  int64_t avg_record_bytes_ = 256;  // of the last decode, for ReserveFor

  ondemand::parser parser_;
  ondemand::parser array_parser_;
  ondemand::parser envelope_parser_;  ///< change events (their rows: parser_)
  ondemand::parser stream_parser_;    ///< document streams over regions of lines
  std::vector<char> buffer_;

  // State of the current Decode.
  const char* base_ = nullptr;  ///< the input (read in place), or its copy
  const char* end_ = nullptr;
  const char* copy_ = nullptr;  ///< the padded copy (buffer_) of the input's end
  const char* copy_end_ = nullptr;
  const char* copy_origin_ = nullptr;  ///< where the copy's first byte is in the input
  const JsonInputPosition* where_ = nullptr;
  DecodeResult result_;
  int64_t rows_ = 0;
  const char* line_cursor_ = nullptr;
  int64_t line_at_cursor_ = 1;

  std::vector<std::pair<std::string, Seen>> inferred_;
  std::unordered_map<std::string, size_t> inferred_index_;
};

Result<std::unique_ptr<JsonDecoder>> JsonDecoder::Make(JsonDecodeOptions options) {
  if (options.max_record_bytes <= 0) {
    return Status::Invalid("max_record_bytes must be > 0, got ", options.max_record_bytes);
  }
  if (options.max_raw_bytes < 0) {
    return Status::Invalid("max_raw_bytes must be >= 0, got ", options.max_raw_bytes);
  }
  if (!options.ts_ms_column.empty() && options.format != JsonFormat::kDebezium) {
    return Status::Invalid("ts_ms_column '", options.ts_ms_column,
                           "' needs format='debezium' (it takes the events' source.ts_ms)");
  }
  if (!options.op_column.empty() && options.format == JsonFormat::kDebezium) {
    return Status::Invalid("op_column '", options.op_column,
                           "' and format='debezium' exclude each other (a Debezium event "
                           "carries its op)");
  }
  auto schema = options.schema;
  auto impl = std::make_unique<Impl>(std::move(options));
  RILL_RETURN_NOT_OK(impl->SetSchema(std::move(schema)));
  return std::unique_ptr<JsonDecoder>(new JsonDecoder(std::move(impl)));
}

JsonDecoder::JsonDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JsonDecoder::~JsonDecoder() = default;

Result<DecodeResult> JsonDecoder::Decode(std::string_view data, const JsonInputPosition& where) {
  return impl_->Decode(data, where);
}

Status JsonDecoder::SetSchema(std::shared_ptr<arrow::Schema> schema) {
  return impl_->SetSchema(std::move(schema));
}

std::shared_ptr<arrow::Schema> JsonDecoder::schema() const { return impl_->schema(); }

}  // namespace rill
