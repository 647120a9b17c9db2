// ChangeBatcher (postgres_cdc_internal.h): PostgreSQL text values into Arrow
// builders, one row per change, with the row's operation in kWriteOpColumn.
#include <charconv>
#include <cstring>

#include <arrow/api.h>
#include <arrow/util/decimal.h>

#include "rill/connector/postgres_cdc_internal.h"
#include "rill/common/row_ops.h"

namespace rill::pgcdc_internal {

namespace {

constexpr size_t kMaxRejectBytes = 4096;

enum class Kind {
  kBool, kInt16, kInt32, kInt64, kFloat32, kFloat64, kDecimal, kString, kBytea,
  kDate, kTimestamp, kList, kAbsent,
};

template <typename T>
bool ParseInt(std::string_view s, T* out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}

template <typename T>
bool ParseFloat(std::string_view s, T* out) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  if (r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty()) return true;
  // PostgreSQL prints infinities as (-)Infinity, NaN as NaN; from_chars takes
  // "inf", "infinity" and "nan" in any case, so only out-of-range is left.
  return false;
}

// Days from 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

// "YYYY-MM-DD" at the front of `s`; advances `s`.
bool ParseDatePart(std::string_view* s, int64_t* days) {
  const size_t dash = s->find('-', 1);
  if (dash == std::string_view::npos || s->size() < dash + 6) return false;
  int64_t y = 0;
  unsigned m = 0, d = 0;
  if (!ParseInt(s->substr(0, dash), &y) || !ParseInt(s->substr(dash + 1, 2), &m) ||
      (*s)[dash + 3] != '-' || !ParseInt(s->substr(dash + 4, 2), &d) || m < 1 || m > 12 ||
      d < 1 || d > 31) {
    return false;
  }
  *days = DaysFromCivil(y, m, d);
  s->remove_prefix(dash + 6);
  return true;
}

bool ParseDate(std::string_view s, int32_t* out) {
  int64_t days = 0;
  if (!ParseDatePart(&s, &days) || !s.empty()) return false;  // "infinity", " BC": rejected
  *out = static_cast<int32_t>(days);
  return true;
}

// "YYYY-MM-DD HH:MM:SS[.ffffff][+HH[:MM[:SS]]]" -> microseconds since the epoch
// (UTC when an offset is given; the connection's TimeZone is UTC).
bool ParseTimestamp(std::string_view s, int64_t* out) {
  int64_t days = 0;
  if (!ParseDatePart(&s, &days) || s.size() < 9 || s[0] != ' ' || s[3] != ':' || s[6] != ':') {
    return false;
  }
  int hh = 0, mm = 0, ss = 0;
  if (!ParseInt(s.substr(1, 2), &hh) || !ParseInt(s.substr(4, 2), &mm) ||
      !ParseInt(s.substr(7, 2), &ss)) {
    return false;
  }
  s.remove_prefix(9);
  int64_t micros = 0;
  if (!s.empty() && s[0] == '.') {
    size_t n = 1;
    int64_t frac = 0;
    while (n < s.size() && s[n] >= '0' && s[n] <= '9' && n <= 6) {
      frac = frac * 10 + (s[n] - '0');
      ++n;
    }
    for (size_t k = n; k <= 6; ++k) frac *= 10;
    micros = frac;
    s.remove_prefix(n);
  }
  int64_t offset = 0;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    const int sign = s[0] == '-' ? -1 : 1;
    int oh = 0, om = 0, os = 0;
    if (s.size() < 3 || !ParseInt(s.substr(1, 2), &oh)) return false;
    s.remove_prefix(3);
    if (!s.empty() && s[0] == ':') {
      if (s.size() < 3 || !ParseInt(s.substr(1, 2), &om)) return false;
      s.remove_prefix(3);
    }
    if (!s.empty() && s[0] == ':') {
      if (s.size() < 3 || !ParseInt(s.substr(1, 2), &os)) return false;
      s.remove_prefix(3);
    }
    offset = sign * (oh * 3600 + om * 60 + os);
  }
  if (!s.empty()) return false;
  *out = ((days * 86400 + hh * 3600 + mm * 60 + ss) - offset) * 1000000 + micros;
  return true;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool ParseBytea(std::string_view s, std::string* out) {
  out->clear();
  if (s.size() < 2 || s[0] != '\\' || s[1] != 'x' || s.size() % 2 != 0) return false;
  out->reserve((s.size() - 2) / 2);
  for (size_t i = 2; i < s.size(); i += 2) {
    const int a = HexDigit(s[i]), b = HexDigit(s[i + 1]);
    if (a < 0 || b < 0) return false;
    out->push_back(static_cast<char>(a * 16 + b));
  }
  return true;
}

// One-dimensional array literal: "{a,\"b c\",NULL}". Elements go to `items`
// (nullopt for NULL), their unescaped bytes into `scratch`.
Status ParseArray(std::string_view s, std::vector<std::optional<std::string>>* items) {
  items->clear();
  if (!s.empty() && s[0] == '[') {  // "[1:3]={...}": explicit bounds
    const size_t eq = s.find('=');
    if (eq == std::string_view::npos) return Status::Invalid("bad array literal");
    s.remove_prefix(eq + 1);
  }
  if (s.size() < 2 || s.front() != '{' || s.back() != '}') {
    return Status::Invalid("bad array literal");
  }
  s = s.substr(1, s.size() - 2);
  if (s.empty()) return Status::OK();
  size_t i = 0;
  while (true) {
    while (i < s.size() && s[i] == ' ') ++i;
    if (i < s.size() && s[i] == '{') {
      return Status::NotImplemented("multi-dimensional arrays");
    }
    if (i < s.size() && s[i] == '"') {
      std::string v;
      ++i;
      while (i < s.size() && s[i] != '"') {
        if (s[i] == '\\' && i + 1 < s.size()) ++i;
        v.push_back(s[i++]);
      }
      if (i >= s.size()) return Status::Invalid("bad array literal: unterminated quote");
      ++i;
      items->push_back(std::move(v));
    } else {
      size_t end = i;
      while (end < s.size() && s[end] != ',') ++end;
      std::string_view v = s.substr(i, end - i);
      while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
      if (v.size() == 4 && (v[0] == 'N' || v[0] == 'n') && (v[1] == 'U' || v[1] == 'u') &&
          (v[2] == 'L' || v[2] == 'l') && (v[3] == 'L' || v[3] == 'l')) {
        items->push_back(std::nullopt);
      } else {
        items->push_back(std::string(v));
      }
      i = end;
    }
    while (i < s.size() && s[i] == ' ') ++i;
    if (i >= s.size()) break;
    if (s[i] != ',') return Status::Invalid("bad array literal");
    ++i;
  }
  return Status::OK();
}

/// Appends one column's values, parsing PostgreSQL's text form.
struct ColumnSink {
  Kind kind = Kind::kAbsent;
  std::shared_ptr<arrow::DataType> type;
  std::unique_ptr<arrow::ArrayBuilder> owned;  // top-level builders only
  arrow::ArrayBuilder* builder = nullptr;
  int32_t precision = 0, scale = 0;
  std::unique_ptr<ColumnSink> element;  // lists
  std::string scratch;
  std::vector<std::optional<std::string>> items;

  Status Init(const std::shared_ptr<arrow::DataType>& t, arrow::ArrayBuilder* b) {
    type = t;
    builder = b;
    switch (t->id()) {
      case arrow::Type::BOOL: kind = Kind::kBool; break;
      case arrow::Type::INT16: kind = Kind::kInt16; break;
      case arrow::Type::INT32: kind = Kind::kInt32; break;
      case arrow::Type::INT64: kind = Kind::kInt64; break;
      case arrow::Type::FLOAT: kind = Kind::kFloat32; break;
      case arrow::Type::DOUBLE: kind = Kind::kFloat64; break;
      case arrow::Type::DECIMAL128: {
        kind = Kind::kDecimal;
        const auto& d = static_cast<const arrow::Decimal128Type&>(*t);
        precision = d.precision();
        scale = d.scale();
        break;
      }
      case arrow::Type::STRING: kind = Kind::kString; break;
      case arrow::Type::BINARY: kind = Kind::kBytea; break;
      case arrow::Type::DATE32: kind = Kind::kDate; break;
      case arrow::Type::TIMESTAMP: kind = Kind::kTimestamp; break;
      case arrow::Type::LIST: {
        kind = Kind::kList;
        element = std::make_unique<ColumnSink>();
        auto* list = static_cast<arrow::ListBuilder*>(b);
        RILL_RETURN_NOT_OK(element->Init(
            static_cast<const arrow::ListType&>(*t).value_type(), list->value_builder()));
        break;
      }
      default:
        return Status::NotImplemented("no text parser for Arrow type ", t->ToString());
    }
    return Status::OK();
  }

  Status Bad(std::string_view text) const {
    std::string shown(text.substr(0, 80));
    return Status::Invalid("cannot read '", shown, "' as ", type->ToString());
  }

  void AppendNull() { (void)builder->AppendNull(); }

  /// Parse `text` and append it; on an error nothing of this value is
  /// appended, except for lists (whose row the caller then skips).
  Status Append(std::string_view text) {
    switch (kind) {
      case Kind::kBool: {
        bool v;
        if (text == "t" || text == "true") {
          v = true;
        } else if (text == "f" || text == "false") {
          v = false;
        } else {
          return Bad(text);
        }
        return static_cast<arrow::BooleanBuilder*>(builder)->Append(v);
      }
      case Kind::kInt16: {
        int16_t v;
        if (!ParseInt(text, &v)) return Bad(text);
        return static_cast<arrow::Int16Builder*>(builder)->Append(v);
      }
      case Kind::kInt32: {
        int32_t v;
        if (!ParseInt(text, &v)) return Bad(text);
        return static_cast<arrow::Int32Builder*>(builder)->Append(v);
      }
      case Kind::kInt64: {
        int64_t v;
        if (!ParseInt(text, &v)) return Bad(text);
        return static_cast<arrow::Int64Builder*>(builder)->Append(v);
      }
      case Kind::kFloat32: {
        float v;
        if (!ParseFloat(text, &v)) return Bad(text);
        return static_cast<arrow::FloatBuilder*>(builder)->Append(v);
      }
      case Kind::kFloat64: {
        double v;
        if (!ParseFloat(text, &v)) return Bad(text);
        return static_cast<arrow::DoubleBuilder*>(builder)->Append(v);
      }
      case Kind::kDecimal: {
        arrow::Decimal128 v;
        int32_t p = 0, s = 0;
        if (!arrow::Decimal128::FromString(text, &v, &p, &s).ok()) return Bad(text);
        auto rescaled = v.Rescale(s, scale);
        if (!rescaled.ok() || !rescaled->FitsInPrecision(precision)) {
          return Status::Invalid("numeric '", std::string(text.substr(0, 80)),
                                 "' does not fit ", type->ToString());
        }
        return static_cast<arrow::Decimal128Builder*>(builder)->Append(*rescaled);
      }
      case Kind::kString:
        return static_cast<arrow::StringBuilder*>(builder)->Append(text);
      case Kind::kBytea:
        if (!ParseBytea(text, &scratch)) return Bad(text);
        return static_cast<arrow::BinaryBuilder*>(builder)->Append(scratch);
      case Kind::kDate: {
        int32_t v;
        if (!ParseDate(text, &v)) return Bad(text);
        return static_cast<arrow::Date32Builder*>(builder)->Append(v);
      }
      case Kind::kTimestamp: {
        int64_t v;
        if (!ParseTimestamp(text, &v)) return Bad(text);
        return static_cast<arrow::TimestampBuilder*>(builder)->Append(v);
      }
      case Kind::kList: {
        RILL_RETURN_NOT_OK(ParseArray(text, &items));
        RILL_RETURN_NOT_OK(static_cast<arrow::ListBuilder*>(builder)->Append());
        for (const auto& item : items) {
          if (!item) {
            element->AppendNull();
          } else {
            RILL_RETURN_NOT_OK(element->Append(*item));
          }
        }
        return Status::OK();
      }
      case Kind::kAbsent:
        return Status::OK();
    }
    return Status::OK();
  }
};

std::string RenderTuple(const PgRelation& rel, const std::vector<PgValue>& values) {
  std::string out;
  for (size_t i = 0; i < values.size() && out.size() < kMaxRejectBytes; ++i) {
    if (i > 0) out += ", ";
    out += i < rel.columns.size() ? rel.columns[i].name : "?";
    out += '=';
    if (values[i].kind == 'n') {
      out += "NULL";
    } else if (values[i].kind == 'u') {
      out += "(unchanged TOAST)";
    } else {
      out.append(values[i].text.data(), values[i].text.size());
    }
  }
  if (out.size() > kMaxRejectBytes) out.resize(kMaxRejectBytes);
  return out;
}

}  // namespace

struct ChangeBatcher::Impl {
  PgRelation relation;
  std::string connector;
  std::shared_ptr<arrow::Schema> schema;  // with kWriteOpColumn last
  std::vector<int> source;                // per output column: relation index or -1
  std::vector<ColumnSink> sinks;
  arrow::Int8Builder ops;
  std::vector<int> key_index;             // relation indices of the key columns
  std::vector<std::string> unknown;
  std::vector<RejectedRecord> rejects;
  int64_t rows = 0;

  void Pad() {
    for (auto& s : sinks) {
      while (s.builder->length() < rows + 1) s.AppendNull();
    }
  }

  void Finish(RowOp op) {
    Pad();
    (void)ops.Append(static_cast<int8_t>(op));
    ++rows;
  }

  void Reject(const std::vector<PgValue>& values, const std::string& position,
              const Status& error) {
    Pad();
    (void)ops.Append(static_cast<int8_t>(RowOp::kSkip));
    ++rows;
    RejectedRecord r;
    r.connector = connector;
    r.position = position;
    r.error = error.message();
    r.raw = RenderTuple(relation, values);
    r.raw_size = static_cast<int64_t>(r.raw.size());
    rejects.push_back(std::move(r));
  }

  // Append the values of one row; the value of an unchanged TOAST column
  // comes from `fallback`.
  Status AppendValues(const std::vector<PgValue>& values, const std::vector<PgValue>& fallback,
                      bool keys_only) {
    if (values.size() != relation.columns.size()) {
      return Status::Invalid("tuple has ", values.size(), " columns, relation '",
                             relation.relname, "' has ", relation.columns.size());
    }
    for (size_t i = 0; i < sinks.size(); ++i) {
      const int src = source[i];
      if (src < 0) {
        sinks[i].AppendNull();
        continue;
      }
      const PgValue* v = &values[static_cast<size_t>(src)];
      if (v->kind == 'u') {
        if (static_cast<size_t>(src) < fallback.size() &&
            fallback[static_cast<size_t>(src)].kind != 'u') {
          v = &fallback[static_cast<size_t>(src)];
        } else if (keys_only) {
          sinks[i].AppendNull();
          continue;
        } else {
          return Status::Invalid("column '", relation.columns[static_cast<size_t>(src)].name,
                                 "': the server did not send its unchanged TOAST value "
                                 "(REPLICA IDENTITY FULL sends it)");
        }
      }
      if (v->kind == 'n') {
        sinks[i].AppendNull();
        continue;
      }
      Status st = sinks[i].Append(v->text);
      if (!st.ok()) {
        return Status::Invalid("column '", relation.columns[static_cast<size_t>(src)].name,
                               "': ", st.message());
      }
    }
    return Status::OK();
  }
};

Result<std::unique_ptr<ChangeBatcher>> ChangeBatcher::Make(
    const PgRelation& relation, const std::shared_ptr<arrow::Schema>& target,
    const std::vector<std::string>& primary_key, NumericAs numeric_as,
    std::string connector_name) {
  auto impl = std::make_unique<Impl>();
  impl->relation = relation;
  impl->connector = std::move(connector_name);
  std::vector<std::shared_ptr<arrow::Field>> fields;
  auto relation_index = [&](const std::string& name) {
    for (size_t i = 0; i < relation.columns.size(); ++i) {
      if (relation.columns[i].name == name) return static_cast<int>(i);
    }
    return -1;
  };
  if (target != nullptr) {
    for (const auto& f : target->fields()) {
      if (f->name() == kWriteOpColumn) continue;
      const int src = relation_index(f->name());
      impl->source.push_back(src);
      if (src < 0) {
        fields.push_back(arrow::field(f->name(), f->type()));
      } else {
        const PgColumn& c = relation.columns[static_cast<size_t>(src)];
        fields.push_back(arrow::field(c.name, MapPgType(c.type_oid, c.typmod, numeric_as)));
      }
    }
    for (const auto& c : relation.columns) {
      if (target->GetFieldIndex(c.name) < 0) impl->unknown.push_back(c.name);
    }
  } else {
    for (size_t i = 0; i < relation.columns.size(); ++i) {
      const PgColumn& c = relation.columns[i];
      impl->source.push_back(static_cast<int>(i));
      fields.push_back(arrow::field(c.name, MapPgType(c.type_oid, c.typmod, numeric_as)));
    }
  }
  impl->sinks.resize(fields.size());
  for (size_t i = 0; i < fields.size(); ++i) {
    ColumnSink& s = impl->sinks[i];
    RILL_ASSIGN_OR_RAISE(s.owned, arrow::MakeBuilder(fields[i]->type()));
    if (impl->source[i] < 0) {
      s.type = fields[i]->type();
      s.builder = s.owned.get();
      s.kind = Kind::kAbsent;
    } else {
      RILL_RETURN_NOT_OK(s.Init(fields[i]->type(), s.owned.get()));
    }
  }
  fields.push_back(arrow::field(kWriteOpColumn, arrow::int8()));
  impl->schema = arrow::schema(std::move(fields));
  for (const auto& k : primary_key) {
    const int i = relation_index(k);
    if (i >= 0) impl->key_index.push_back(i);
  }
  if (impl->key_index.empty()) {
    for (size_t i = 0; i < relation.columns.size(); ++i) {
      if (relation.columns[i].key) impl->key_index.push_back(static_cast<int>(i));
    }
  }
  return std::unique_ptr<ChangeBatcher>(new ChangeBatcher(std::move(impl)));
}

ChangeBatcher::ChangeBatcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ChangeBatcher::~ChangeBatcher() = default;

void ChangeBatcher::AddUpsert(const std::vector<PgValue>& values,
                              const std::vector<PgValue>& fallback,
                              const std::string& position) {
  Status st = impl_->AppendValues(values, fallback, /*keys_only=*/false);
  if (!st.ok()) {
    impl_->Reject(values, position, st);
    return;
  }
  impl_->Finish(RowOp::kUpsert);
}

void ChangeBatcher::AddUpdate(char old_kind, const std::vector<PgValue>& old_values,
                              const std::vector<PgValue>& new_values,
                              const std::string& position) {
  if (old_kind != 0 && old_values.size() == new_values.size()) {
    bool changed = false;
    for (int k : impl_->key_index) {
      const PgValue& a = old_values[static_cast<size_t>(k)];
      const PgValue& b = new_values[static_cast<size_t>(k)];
      if (a.kind == 'u' || b.kind == 'u') continue;
      if (a.kind != b.kind || a.text != b.text) changed = true;
    }
    if (changed) AddDelete(old_values, position);
  }
  // Only a full old tuple ('O', REPLICA IDENTITY FULL) holds the values of
  // unchanged TOAST columns; a key tuple's other columns are nulls.
  AddUpsert(new_values, old_kind == 'O' ? old_values : std::vector<PgValue>{}, position);
}

void ChangeBatcher::AddDelete(const std::vector<PgValue>& old_values,
                              const std::string& position) {
  Status st = impl_->AppendValues(old_values, {}, /*keys_only=*/true);
  if (!st.ok()) {
    impl_->Reject(old_values, position, st);
    return;
  }
  impl_->Finish(RowOp::kDelete);
}

void ChangeBatcher::AddTruncate() { impl_->Finish(RowOp::kTruncate); }

int64_t ChangeBatcher::rows() const { return impl_->rows; }

Result<std::shared_ptr<arrow::RecordBatch>> ChangeBatcher::Flush() {
  if (impl_->rows == 0) return std::shared_ptr<arrow::RecordBatch>();
  std::vector<std::shared_ptr<arrow::Array>> arrays;
  arrays.reserve(impl_->sinks.size() + 1);
  for (auto& s : impl_->sinks) {
    std::shared_ptr<arrow::Array> a;
    RILL_RETURN_NOT_OK(s.builder->Finish(&a));
    arrays.push_back(std::move(a));
  }
  std::shared_ptr<arrow::Array> ops;
  RILL_RETURN_NOT_OK(impl_->ops.Finish(&ops));
  arrays.push_back(std::move(ops));
  const int64_t rows = impl_->rows;
  impl_->rows = 0;
  return arrow::RecordBatch::Make(impl_->schema, rows, std::move(arrays));
}

std::vector<RejectedRecord> ChangeBatcher::TakeRejects() {
  return std::exchange(impl_->rejects, {});
}

const std::vector<std::string>& ChangeBatcher::unknown_columns() const {
  return impl_->unknown;
}

const std::shared_ptr<arrow::Schema>& ChangeBatcher::schema() const { return impl_->schema; }

}  // namespace rill::pgcdc_internal
