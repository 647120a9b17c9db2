// The column writers (json_columns_internal.h): their buffers, nulls, converted
// cells, and the values of struct, list and map columns (read with simdjson
// On-Demand, checked, and written straight into the children's buffers).
#include <algorithm>
#include <limits>

#include <arrow/array/data.h>
#include <arrow/type.h>
#include <arrow/util/bit_util.h>
#include <arrow/util/bitmap_ops.h>

#include "rill/connector/json_columns_internal.h"

namespace rill::json_internal {

namespace {

namespace ondemand = simdjson::ondemand;
using simdjson::error_code;

/// Prefix the message of a failed child's status with its name: `open`, `name`,
/// `close` (".field", "[3]"). Built by Status, not by std::string operator+,
/// which g++ 12 flags with a false -Wrestrict once inlined here.
Status InChild(const Status& st, std::string_view open, std::string_view name,
               std::string_view close = "") {
  if (st.ok()) return st;
  std::string_view msg = st.message();
  bool nested = !msg.empty() && (msg[0] == '.' || msg[0] == '[');
  return Status::Invalid(open, name, close, nested ? "" : ": ", msg);
}

Status JsonError(error_code err) { return Status::Invalid(JsonErrorMessage(err)); }

/// "expected an object, got …": reads (and consumes) `value` to describe it.
Status ShapeMismatch(const char* expected, ondemand::value value) {
  JsonScalar v;
  error_code err = ReadScalar(value, &v);
  if (err) return JsonError(err);
  return Status::Invalid("expected ", expected, ", ", Describe(v));
}

/// Read and check a value nothing is appended for (a field the struct does not
/// have, or a repeated one): it must still be valid JSON.
error_code SkipValue(ondemand::value value) {
  ondemand::json_type type;
  error_code err = value.type().get(type);
  if (err) return err;
  if (type == ondemand::json_type::object) {
    ondemand::object obj;
    if ((err = value.get_object().get(obj))) return err;
    for (auto field_result : obj) {
      ondemand::field field;
      std::string_view key;
      if ((err = std::move(field_result).get(field)) || (err = field.unescaped_key().get(key)) ||
          (err = SkipValue(field.value()))) {
        return err;
      }
    }
    return simdjson::SUCCESS;
  }
  if (type == ondemand::json_type::array) {
    ondemand::array arr;
    if ((err = value.get_array().get(arr))) return err;
    for (auto item : arr) {
      ondemand::value v;
      if ((err = item.get(v)) || (err = SkipValue(v))) return err;
    }
    return simdjson::SUCCESS;
  }
  JsonScalar scalar;
  return ReadScalar(value, &scalar);
}


/// The child of a struct `spec` that `field` names (-1: none). Fields usually
/// come in schema order: the child at `ordinal` is compared first, raw.
int StructChild(ondemand::field& field, const ColumnSpec& spec, size_t ordinal,
                error_code* err) {
  const auto& children = spec.children;
  if (ordinal < children.size() && RawKeyIs(field.key().raw(), children[ordinal])) {
    return static_cast<int>(ordinal);
  }
  std::string_view key;
  if ((*err = field.unescaped_key().get(key))) return -1;
  for (size_t i = 0; i < children.size(); ++i) {
    if (children[i].name == key) return static_cast<int>(i);
  }
  return -1;
}

/// Parse the common ISO-8601 forms "YYYY-MM-DD" and "YYYY-MM-DDTHH:MM:SS",
/// the latter with an optional fraction of 1-9 digits and an optional 'Z',
/// of years 1900-2199, into nanoseconds since the epoch. False for anything
/// else, valid or not (Arrow's parser decides those); what it accepts, Arrow's
/// parser reads alike (the same instant, finer digits truncated).
bool ParseIsoFast(std::string_view s, int64_t* nanos) {
  const size_t n = s.size();
  if (n != 10 && n < 19) return false;
  auto digit = [&](size_t k, int* out) {
    const unsigned d = static_cast<unsigned char>(s[k]) - '0';
    *out = static_cast<int>(d);
    return d <= 9;
  };
  int y[4], mo[2], d[2];
  if (!digit(0, &y[0]) || !digit(1, &y[1]) || !digit(2, &y[2]) || !digit(3, &y[3]) ||
      s[4] != '-' || !digit(5, &mo[0]) || !digit(6, &mo[1]) || s[7] != '-' ||
      !digit(8, &d[0]) || !digit(9, &d[1])) {
    return false;
  }
  const int year = y[0] * 1000 + y[1] * 100 + y[2] * 10 + y[3];
  const int month = mo[0] * 10 + mo[1];
  const int day = d[0] * 10 + d[1];
  if (year < 1900 || year > 2199 || month < 1 || month > 12 || day < 1) return false;
  const bool leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
  static constexpr int kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (day > kDays[month - 1] + (month == 2 && leap ? 1 : 0)) return false;
  int64_t secs = 0;
  int64_t frac = 0;
  if (n > 10) {
    int h[2], mi[2], se[2];
    if (s[10] != 'T' || !digit(11, &h[0]) || !digit(12, &h[1]) || s[13] != ':' ||
        !digit(14, &mi[0]) || !digit(15, &mi[1]) || s[16] != ':' || !digit(17, &se[0]) ||
        !digit(18, &se[1])) {
      return false;
    }
    const int hour = h[0] * 10 + h[1], minute = mi[0] * 10 + mi[1], second = se[0] * 10 + se[1];
    if (hour > 23 || minute > 59 || second > 59) return false;
    secs = hour * 3600 + minute * 60 + second;
    size_t k = 19;
    if (k < n && s[k] == '.') {
      int64_t scale = 100000000;
      int digits = 0;
      int v;
      for (++k; k < n && digit(k, &v); ++k) {
        if (++digits > 9) return false;
        frac += v * scale;
        scale /= 10;
      }
      if (digits == 0) return false;
    }
    if (k < n && s[k] == 'Z') ++k;
    if (k != n) return false;
  }
  // Days from the civil date (H. Hinnant's algorithm; years here are > 0).
  const int64_t yy = year - (month <= 2 ? 1 : 0);
  const int64_t era = yy / 400;
  const int64_t yoe = yy - era * 400;
  const int64_t doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const int64_t days = era * 146097 + doe - 719468;
  *nanos = (days * 86400 + secs) * 1000000000 + frac;
  return true;
}

/// `a` / `b` rounded down.
int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return q - ((a % b != 0) & ((a < 0) != (b < 0)));
}

bool IsFixedList(const ColumnWriter& w) { return w.type_id == arrow::Type::FIXED_SIZE_LIST; }

/// Write a blank value at `i` (< capacity): valid, what Arrow's
/// AppendEmptyValue appends (zero, "", [], a struct of empty values); not
/// valid, a null (a null fixed-size list holds null items, a null struct
/// empty children, as Arrow's builders append them).
Status WriteBlank(ColumnWriter& w, int64_t i, bool valid) {
  if (w.offsets) {
    SetOffset(w, i + 1, OffsetAt(w, i));
  } else if (w.width > 0) {
    std::memset(w.values + i * w.width, 0, static_cast<size_t>(w.width));
  } else if (w.type_id == arrow::Type::BOOL) {
    SetBit(w.values, i, false);
  } else if (w.type_id == arrow::Type::STRUCT) {
    for (ColumnWriter& c : w.children) {
      RILL_RETURN_NOT_OK(EnsureIndex(c, i));
      RILL_RETURN_NOT_OK(WriteBlank(c, i, /*valid=*/true));
    }
  } else if (IsFixedList(w)) {
    const int64_t n = w.spec->list_size;
    ColumnWriter& c = w.children[0];
    RILL_RETURN_NOT_OK(EnsureIndex(c, (i + 1) * n - 1));
    for (int64_t k = 0; k < n; ++k) RILL_RETURN_NOT_OK(WriteBlank(c, i * n + k, valid));
  }
  SetBit(w.validity, i, valid);
  return Status::OK();
}

Status Write(ondemand::value& value, ColumnWriter& w, int64_t i);

Status WriteStruct(ondemand::object& obj, ColumnWriter& w, int64_t i) {
  SetBit(w.validity, i, true);
  for (ColumnWriter& c : w.children) RILL_RETURN_NOT_OK(EnsureIndex(c, i));
  const size_t n = w.children.size();
  uint64_t seen_bits = 0;
  std::vector<char> seen_wide(n > 64 ? n : 0);
  auto seen = [&](size_t k) -> bool {
    return n > 64 ? seen_wide[k] != 0 : ((seen_bits >> k) & 1) != 0;
  };
  size_t ordinal = 0;
  for (auto field_result : obj) {
    // Results are read in place (by reference): a copy of what was just
    // built stalls on store forwarding.
    error_code err = field_result.error();
    ondemand::field& field = field_result.value_unsafe();
    int child = err ? -1 : StructChild(field, *w.spec, ordinal++, &err);
    if (err) return JsonError(err);
    if (child < 0 || seen(static_cast<size_t>(child))) {
      // Not a field of the struct, or a repeat (the first one counts).
      if ((err = SkipValue(field.value()))) return JsonError(err);
      continue;
    }
    if (n > 64) {
      seen_wide[child] = 1;
    } else {
      seen_bits |= uint64_t{1} << child;
    }
    ColumnWriter& c = w.children[child];
    Status st = Write(field.value(), c, i);
    if (!st.ok()) return InChild(st, ".", c.spec->name);
  }
  for (size_t k = 0; k < n; ++k) {
    if (seen(k)) continue;
    ColumnWriter& c = w.children[k];
    if (!c.spec->nullable) return Status::Invalid(".", c.spec->name, ": missing");
    RILL_RETURN_NOT_OK(WriteNull(c, i));
  }
  return Status::OK();
}

Status WriteList(ondemand::array& arr, ColumnWriter& w, int64_t i) {
  const bool fixed = IsFixedList(w);
  const int64_t start = fixed ? i * w.spec->list_size : OffsetAt(w, i);
  ColumnWriter& c = w.children[0];
  int64_t n = 0;
  for (auto item : arr) {
    if (error_code err = item.error()) return JsonError(err);
    // Items past a fixed size land on the next rows' indexes: the record is
    // rejected below, and those rows overwrite them.
    RILL_RETURN_NOT_OK(EnsureIndex(c, start + n));
    Status st = Write(item.value_unsafe(), c, start + n);
    if (!st.ok()) return InChild(st, "[", std::to_string(n), "]");
    ++n;
  }
  if (fixed) {
    if (n != w.spec->list_size) {
      return Status::Invalid("expected ", w.spec->list_size, " items, got ", n);
    }
  } else {
    SetOffset(w, i + 1, start + n);
  }
  SetBit(w.validity, i, true);
  return Status::OK();
}

Status WriteMap(ondemand::object& obj, ColumnWriter& w, int64_t i) {
  const int64_t start = OffsetAt(w, i);
  ColumnWriter& keys = w.children[0];
  ColumnWriter& items = w.children[1];
  int64_t n = 0;
  for (auto field_result : obj) {
    error_code err = field_result.error();
    if (err) return JsonError(err);
    ondemand::field& field = field_result.value_unsafe();
    std::string_view key;
    if ((err = field.unescaped_key().get(key))) return JsonError(err);
    const int64_t k = start + n;
    RILL_RETURN_NOT_OK(EnsureIndex(keys, k));
    RILL_RETURN_NOT_OK(EnsureIndex(items, k));
    RILL_RETURN_NOT_OK(PutString(keys, k, key));
    Status st = Write(field.value(), items, k);
    if (!st.ok()) return InChild(st, ".", key);
    ++n;
  }
  SetOffset(w, i + 1, start + n);
  SetBit(w.validity, i, true);
  return Status::OK();
}

bool IsNestedKind(ColKind kind) {
  return kind == ColKind::kStruct || kind == ColKind::kList || kind == ColKind::kMap;
}

/// Check `value` for `w` and write it at `i` (< capacity).
Status Write(ondemand::value& value, ColumnWriter& w, int64_t i) {
  const ColumnSpec& spec = *w.spec;
  JsonScalar v;
  if (!IsNestedKind(spec.kind)) {
    // The typed getter first: a failed one consumes nothing (but a temporal
    // string, which it reads into `v`).
    bool written = false;
    RILL_RETURN_NOT_OK(WriteTyped(value, w, i, &v, &written));
    if (written) return Status::OK();
    if (v.type == JsonScalar::kString) {
      Cell cell;
      RILL_RETURN_NOT_OK(Convert(v, spec, &cell));
      return WriteCell(w, i, cell);
    }
  }
  ondemand::json_type type;
  if (error_code err = value.type().get(type)) return JsonError(err);
  if (type == ondemand::json_type::null) {
    bool is_null = false;
    if (error_code err = value.is_null().get(is_null)) return JsonError(err);
    if (!is_null) return JsonError(simdjson::N_ATOM_ERROR);
    if (!spec.nullable) return Status::Invalid("null in a non-nullable field");
    return WriteNull(w, i);
  }
  switch (spec.kind) {
    case ColKind::kStruct:
    case ColKind::kMap:
    case ColKind::kList:
      return WriteNested(value, w, i);
    default: {
      if (error_code err = ReadScalar(value, &v)) return JsonError(err);
      Cell cell;
      RILL_RETURN_NOT_OK(Convert(v, spec, &cell));
      return WriteCell(w, i, cell);
    }
  }
}

/// Resize `buf` (null: allocate it) to `bytes`, keeping its contents.
Status ResizeBuffer(std::shared_ptr<arrow::ResizableBuffer>* buf, int64_t bytes) {
  if (*buf) return (*buf)->Resize(bytes, /*shrink_to_fit=*/false);
  ARROW_ASSIGN_OR_RAISE(auto made, arrow::AllocateResizableBuffer(bytes));
  *buf = std::shared_ptr<arrow::ResizableBuffer>(std::move(made));
  return Status::OK();
}

/// The buffer's first `bytes`, shrunk when most of it would go unused.
Result<std::shared_ptr<arrow::Buffer>> TakeBuffer(std::shared_ptr<arrow::ResizableBuffer>* buf,
                                                  int64_t bytes) {
  RILL_RETURN_NOT_OK((*buf)->Resize(bytes, /*shrink_to_fit=*/bytes < (*buf)->capacity() / 2));
  std::shared_ptr<arrow::Buffer> out = std::move(*buf);
  buf->reset();
  return out;
}

/// Zero the bits of the last byte of `bits` past `length`.
void ClearTail(uint8_t* bits, int64_t length) {
  if (length % 8 != 0) bits[length / 8] &= static_cast<uint8_t>((1u << (length % 8)) - 1);
}

}  // namespace

ColumnWriter MakeColumnWriter(const ColumnSpec& spec) {
  ColumnWriter w;
  w.spec = &spec;
  w.type_id = spec.type_id;
  switch (spec.type_id) {
    case arrow::Type::STRING:
    case arrow::Type::BINARY:
    case arrow::Type::LIST:
    case arrow::Type::MAP:
      w.offsets = true;
      break;
    case arrow::Type::LARGE_STRING:
    case arrow::Type::LARGE_BINARY:
    case arrow::Type::LARGE_LIST:
      w.offsets = w.large = true;
      break;
    case arrow::Type::BOOL:
    case arrow::Type::STRUCT:
    case arrow::Type::FIXED_SIZE_LIST:
      break;
    default:
      w.width = spec.type->byte_width();
      break;
  }
  for (const ColumnSpec& c : spec.children) w.children.push_back(MakeColumnWriter(c));
  return w;
}

Status GrowColumn(ColumnWriter* w, int64_t indexes) {
  const int64_t capacity = std::max<int64_t>({indexes, w->capacity * 2, 64});
  RILL_RETURN_NOT_OK(ResizeBuffer(&w->validity_buf, arrow::bit_util::BytesForBits(capacity)));
  w->validity = w->validity_buf->mutable_data();
  const int64_t value_bytes = w->offsets     ? (capacity + 1) * (w->large ? 8 : 4)
                              : w->width > 0 ? capacity * w->width
                              : w->type_id == arrow::Type::BOOL
                                  ? arrow::bit_util::BytesForBits(capacity)
                                  : 0;
  if (value_bytes > 0) {
    RILL_RETURN_NOT_OK(ResizeBuffer(&w->values_buf, value_bytes));
    w->values = w->values_buf->mutable_data();
    if (w->capacity == 0 && w->offsets) SetOffset(*w, 0, 0);
  }
  w->capacity = capacity;
  return Status::OK();
}

Status GrowData(ColumnWriter* w, int64_t bytes) {
  if (!w->large && bytes > std::numeric_limits<int32_t>::max()) {
    return Status::CapacityError("column '", w->spec->name, "' would hold more than 2^31 - 1 ",
                                 "bytes of ", w->spec->type->ToString());
  }
  int64_t capacity = std::max<int64_t>({bytes, w->data_capacity * 2, 256});
  // 32-bit offsets: never more (WriteTyped's short copies stay inside it too).
  if (!w->large) capacity = std::min<int64_t>(capacity, std::numeric_limits<int32_t>::max());
  RILL_RETURN_NOT_OK(ResizeBuffer(&w->data_buf, capacity));
  w->data = w->data_buf->mutable_data();
  w->data_capacity = capacity;
  return Status::OK();
}

Status ReserveColumn(ColumnWriter* w, double bytes, int64_t rows) {
  const int64_t indexes =
      w->values_per_byte > 0 ? static_cast<int64_t>(w->values_per_byte * bytes) + 1 : rows;
  if (indexes > w->capacity) RILL_RETURN_NOT_OK(GrowColumn(w, indexes));
  const int64_t data = static_cast<int64_t>(w->data_per_byte * bytes);
  if (w->offsets && data > w->data_capacity && w->children.empty()) {
    RILL_RETURN_NOT_OK(GrowData(w, std::min<int64_t>(data, std::numeric_limits<int32_t>::max())));
  }
  for (ColumnWriter& c : w->children) RILL_RETURN_NOT_OK(ReserveColumn(&c, bytes, rows));
  return Status::OK();
}

Status WriteNull(ColumnWriter& w, int64_t i) { return WriteBlank(w, i, /*valid=*/false); }

Status WriteCell(ColumnWriter& w, int64_t i, const Cell& cell) {
  if (cell.null) return WriteNull(w, i);
  using arrow::Type;
  switch (w.type_id) {
    case Type::INT8: PutValue(w, i, static_cast<int8_t>(cell.i)); break;
    case Type::INT16: PutValue(w, i, static_cast<int16_t>(cell.i)); break;
    case Type::INT32: PutValue(w, i, static_cast<int32_t>(cell.i)); break;
    case Type::INT64: PutValue(w, i, cell.i); break;
    case Type::UINT8: PutValue(w, i, static_cast<uint8_t>(cell.u)); break;
    case Type::UINT16: PutValue(w, i, static_cast<uint16_t>(cell.u)); break;
    case Type::UINT32: PutValue(w, i, static_cast<uint32_t>(cell.u)); break;
    case Type::UINT64: PutValue(w, i, cell.u); break;
    case Type::FLOAT: PutValue(w, i, static_cast<float>(cell.d)); break;
    case Type::DOUBLE: PutValue(w, i, cell.d); break;
    case Type::BOOL:
      SetBit(w.values, i, cell.b);
      SetBit(w.validity, i, true);
      break;
    case Type::STRING:
    case Type::LARGE_STRING:
    case Type::BINARY:
    case Type::LARGE_BINARY:
      return PutString(w, i, cell.s);
    case Type::TIMESTAMP: PutValue(w, i, cell.i); break;
    case Type::DATE32: PutValue(w, i, static_cast<int32_t>(cell.i)); break;
    case Type::DATE64: PutValue(w, i, cell.i); break;
    default:
      return Status::NotImplemented("JSON write to ", w.spec->type->ToString());
  }
  return Status::OK();
}

bool WriteIsoFast(ColumnWriter& w, int64_t i, std::string_view text) {
  int64_t nanos;
  if (!ParseIsoFast(text, &nanos)) return false;
  // As Convert computes them from Arrow's parse (ConvertTemporal).
  static constexpr int64_t kPerUnit[4] = {1000000000, 1000000, 1000, 1};
  constexpr int64_t kMillisPerDay = 86400000;
  if (w.type_id == arrow::Type::TIMESTAMP) {
    PutValue<int64_t>(w, i, FloorDiv(nanos, kPerUnit[w.spec->unit & 3]));
    return true;
  }
  const int64_t ms = FloorDiv(nanos, 1000000);
  if (w.type_id == arrow::Type::DATE64) {
    PutValue<int64_t>(w, i, ms - ms % kMillisPerDay);
  } else {
    PutValue<int32_t>(w, i,
                      static_cast<int32_t>(ms / kMillisPerDay - (ms % kMillisPerDay < 0 ? 1 : 0)));
  }
  return true;
}

Status WriteNested(ondemand::value& value, ColumnWriter& w, int64_t i) {
  const ColumnSpec& spec = *w.spec;
  switch (spec.kind) {
    case ColKind::kStruct:
    case ColKind::kMap: {
      ondemand::json_type type;
      if (error_code err = value.type().get(type)) return JsonError(err);
      if (type != ondemand::json_type::object) return ShapeMismatch("an object", value);
      auto obj = value.get_object();
      if (error_code err = obj.error()) return JsonError(err);
      return spec.kind == ColKind::kStruct ? WriteStruct(obj.value_unsafe(), w, i)
                                           : WriteMap(obj.value_unsafe(), w, i);
    }
    case ColKind::kList: {
      ondemand::json_type type;
      if (error_code err = value.type().get(type)) return JsonError(err);
      if (type != ondemand::json_type::array) return ShapeMismatch("an array", value);
      auto arr = value.get_array();
      if (error_code err = arr.error()) return JsonError(err);
      return WriteList(arr.value_unsafe(), w, i);
    }
    default:
      return Status::Invalid("not a nested column");
  }
}

Result<std::shared_ptr<arrow::ArrayData>> FinishColumn(ColumnWriter* w, int64_t length,
                                                       double bytes) {
  // Writers no value reached (children of lists that were all empty) get
  // their first buffers here: an offsets buffer needs its 0.
  if (w->capacity == 0) RILL_RETURN_NOT_OK(GrowColumn(w, 1));
  w->values_per_byte = bytes > 0 ? static_cast<double>(length) / bytes : 0;
  const int64_t nulls =
      length - arrow::internal::CountSetBits(w->validity, /*bit_offset=*/0, length);
  std::shared_ptr<arrow::Buffer> validity;
  if (nulls > 0) {
    ClearTail(w->validity, length);
    RILL_ASSIGN_OR_RAISE(validity,
                         TakeBuffer(&w->validity_buf, arrow::bit_util::BytesForBits(length)));
  }
  w->validity_buf.reset();
  std::vector<std::shared_ptr<arrow::Buffer>> buffers = {validity};
  std::vector<std::shared_ptr<arrow::ArrayData>> children;
  int64_t child_length = length;
  if (w->offsets) {
    child_length = OffsetAt(*w, length);
    RILL_ASSIGN_OR_RAISE(auto offsets,
                         TakeBuffer(&w->values_buf, (length + 1) * (w->large ? 8 : 4)));
    buffers.push_back(std::move(offsets));
    if (w->children.empty()) {  // string or binary: the bytes
      w->data_per_byte = bytes > 0 ? static_cast<double>(child_length) / bytes : 0;
      if (!w->data_buf) RILL_RETURN_NOT_OK(GrowData(w, 1));
      RILL_ASSIGN_OR_RAISE(auto data, TakeBuffer(&w->data_buf, child_length));
      buffers.push_back(std::move(data));
      w->data = nullptr;
      w->data_capacity = 0;
    }
  } else if (w->width > 0) {
    RILL_ASSIGN_OR_RAISE(auto values, TakeBuffer(&w->values_buf, length * w->width));
    buffers.push_back(std::move(values));
  } else if (w->type_id == arrow::Type::BOOL) {
    ClearTail(w->values, length);
    RILL_ASSIGN_OR_RAISE(auto values,
                         TakeBuffer(&w->values_buf, arrow::bit_util::BytesForBits(length)));
    buffers.push_back(std::move(values));
  } else if (IsFixedList(*w)) {
    child_length = length * w->spec->list_size;
  }
  for (ColumnWriter& c : w->children) {
    RILL_ASSIGN_OR_RAISE(auto child, FinishColumn(&c, child_length, bytes));
    children.push_back(std::move(child));
  }
  if (w->type_id == arrow::Type::MAP) {
    // A map's child is the struct of its entries (keys, items; never null).
    const auto& map = static_cast<const arrow::MapType&>(*w->spec->type);
    auto entries = arrow::ArrayData::Make(map.value_type(), child_length, {nullptr},
                                          std::move(children), /*null_count=*/0);
    children = {std::move(entries)};
  }
  w->values = w->validity = nullptr;
  w->values_buf.reset();
  w->capacity = 0;
  return arrow::ArrayData::Make(w->spec->type, length, std::move(buffers), std::move(children),
                                nulls);
}

}  // namespace rill::json_internal
