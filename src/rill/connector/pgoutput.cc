// pgoutput messages (PostgreSQL's "Logical Replication Message Formats",
// protocol version 1), LSNs, the type mapping and COPY text lines.
#include <charconv>
#include <cstring>

#include <arrow/type.h>
#include <fmt/format.h>

#include "rill/connector/postgres_cdc_internal.h"

namespace rill::pgcdc_internal {

namespace {

/// Big-endian reads over a payload; every read checks the remaining length.
class Reader {
 public:
  Reader(std::string_view data, char type) : data_(data), type_(type) {}

  bool ok() const { return ok_; }
  size_t left() const { return data_.size() - pos_; }

  template <typename T>
  T Int() {
    if (left() < sizeof(T)) {
      ok_ = false;
      pos_ = data_.size();
      return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      v = (v << 8) | static_cast<uint8_t>(data_[pos_ + i]);
    }
    pos_ += sizeof(T);
    return static_cast<T>(v);
  }

  /// A NUL-terminated string.
  std::string_view CString() {
    const size_t end = data_.find('\0', pos_);
    if (end == std::string_view::npos) {
      ok_ = false;
      pos_ = data_.size();
      return {};
    }
    std::string_view s = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }

  std::string_view Bytes(size_t n) {
    if (left() < n) {
      ok_ = false;
      pos_ = data_.size();
      return {};
    }
    std::string_view s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }

  Status Short(const char* what) const {
    return Status::Invalid("pgoutput message '", std::string(1, type_), "': truncated ", what);
  }

 private:
  std::string_view data_;
  size_t pos_ = 1;  // after the type byte
  char type_;
  bool ok_ = true;
};

Status ReadTuple(Reader& r, std::vector<PgValue>* out) {
  const int16_t n = r.Int<int16_t>();
  if (!r.ok() || n < 0) return r.Short("tuple column count");
  out->resize(static_cast<size_t>(n));
  for (int16_t i = 0; i < n; ++i) {
    PgValue& v = (*out)[static_cast<size_t>(i)];
    std::string_view kind = r.Bytes(1);
    if (!r.ok()) return r.Short("tuple column kind");
    v.kind = kind[0];
    v.text = {};
    if (v.kind == 'n' || v.kind == 'u') continue;
    if (v.kind != 't' && v.kind != 'b') {
      return Status::Invalid("pgoutput tuple: unknown column kind '", std::string(1, v.kind),
                             "' in column ", i);
    }
    const int32_t len = r.Int<int32_t>();
    if (!r.ok() || len < 0) return r.Short("tuple value length");
    v.text = r.Bytes(static_cast<size_t>(len));
    if (!r.ok()) return r.Short("tuple value");
    if (v.kind == 'b') {
      return Status::NotImplemented("pgoutput binary tuple values (the connector asks for text)");
    }
  }
  return Status::OK();
}

}  // namespace

Status ParsePgOutput(std::string_view payload, PgMessage* out) {
  if (payload.empty()) return Status::Invalid("empty pgoutput message");
  out->type = payload[0];
  Reader r(payload, out->type);
  out->old_kind = 0;
  out->old_tuple.clear();
  out->new_tuple.clear();
  switch (out->type) {
    case 'B':
      out->lsn = r.Int<uint64_t>();
      out->timestamp = r.Int<int64_t>();
      out->xid = r.Int<uint32_t>();
      if (!r.ok()) return r.Short("begin");
      return Status::OK();
    case 'C':
      (void)r.Int<uint8_t>();  // flags (unused)
      out->lsn = r.Int<uint64_t>();
      out->end_lsn = r.Int<uint64_t>();
      out->timestamp = r.Int<int64_t>();
      if (!r.ok()) return r.Short("commit");
      return Status::OK();
    case 'O':  // origin: (lsn, name); nothing to do with it
      (void)r.Int<uint64_t>();
      (void)r.CString();
      if (!r.ok()) return r.Short("origin");
      return Status::OK();
    case 'Y':  // type: (oid, namespace, name) of a non-builtin type
      (void)r.Int<uint32_t>();
      (void)r.CString();
      (void)r.CString();
      if (!r.ok()) return r.Short("type");
      return Status::OK();
    case 'M':  // logical decoding message (only with the messages option)
      return Status::OK();
    case 'R': {
      PgRelation& rel = out->relation;
      rel.oid = r.Int<uint32_t>();
      rel.nspname = std::string(r.CString());
      rel.relname = std::string(r.CString());
      rel.replica_identity = static_cast<char>(r.Int<uint8_t>());
      const int16_t n = r.Int<int16_t>();
      if (!r.ok() || n < 0) return r.Short("relation");
      rel.columns.resize(static_cast<size_t>(n));
      for (auto& c : rel.columns) {
        c.key = (r.Int<uint8_t>() & 1) != 0;
        c.name = std::string(r.CString());
        c.type_oid = r.Int<uint32_t>();
        c.typmod = r.Int<int32_t>();
      }
      if (!r.ok()) return r.Short("relation column");
      return Status::OK();
    }
    case 'I': {
      out->relid = r.Int<uint32_t>();
      std::string_view n = r.Bytes(1);
      if (!r.ok()) return r.Short("insert");
      if (n[0] != 'N') return Status::Invalid("pgoutput insert: expected 'N', got '", n, "'");
      return ReadTuple(r, &out->new_tuple);
    }
    case 'U': {
      out->relid = r.Int<uint32_t>();
      std::string_view k = r.Bytes(1);
      if (!r.ok()) return r.Short("update");
      if (k[0] == 'K' || k[0] == 'O') {
        out->old_kind = k[0];
        RILL_RETURN_NOT_OK(ReadTuple(r, &out->old_tuple));
        k = r.Bytes(1);
        if (!r.ok()) return r.Short("update");
      }
      if (k[0] != 'N') return Status::Invalid("pgoutput update: expected 'N', got '", k, "'");
      return ReadTuple(r, &out->new_tuple);
    }
    case 'D': {
      out->relid = r.Int<uint32_t>();
      std::string_view k = r.Bytes(1);
      if (!r.ok()) return r.Short("delete");
      if (k[0] != 'K' && k[0] != 'O') {
        return Status::Invalid("pgoutput delete: expected 'K' or 'O', got '", k, "'");
      }
      out->old_kind = k[0];
      return ReadTuple(r, &out->old_tuple);
    }
    case 'T': {
      const int32_t n = r.Int<int32_t>();
      (void)r.Int<uint8_t>();  // options (cascade, restart identity)
      if (!r.ok() || n < 0) return r.Short("truncate");
      out->truncate_relids.resize(static_cast<size_t>(n));
      for (auto& id : out->truncate_relids) id = r.Int<uint32_t>();
      if (!r.ok()) return r.Short("truncate relation ids");
      return Status::OK();
    }
    default:
      return Status::Invalid("unknown pgoutput message type '", std::string(1, out->type), "'");
  }
}

std::string FormatLsn(uint64_t lsn) {
  return fmt::format("{:X}/{:X}", static_cast<uint32_t>(lsn >> 32),
                     static_cast<uint32_t>(lsn & 0xffffffffu));
}

Result<uint64_t> ParseLsn(std::string_view text) {
  const size_t slash = text.find('/');
  uint32_t hi = 0, lo = 0;
  if (slash == std::string_view::npos) return Status::Invalid("bad LSN '", text, "'");
  auto a = std::from_chars(text.data(), text.data() + slash, hi, 16);
  auto b = std::from_chars(text.data() + slash + 1, text.data() + text.size(), lo, 16);
  if (a.ec != std::errc() || a.ptr != text.data() + slash || b.ec != std::errc() ||
      b.ptr != text.data() + text.size() || slash == 0 || slash + 1 == text.size()) {
    return Status::Invalid("bad LSN '", text, "'");
  }
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

uint32_t ArrayElementOid(uint32_t type_oid) {
  switch (type_oid) {
    case 1000: return oid::kBool;
    case 1001: return oid::kBytea;
    case 1003: return oid::kName;
    case 1005: return oid::kInt2;
    case 1007: return oid::kInt4;
    case 1009: return oid::kText;
    case 1014: return oid::kBpchar;
    case 1015: return oid::kVarchar;
    case 1016: return oid::kInt8;
    case 1021: return oid::kFloat4;
    case 1022: return oid::kFloat8;
    case 1028: return oid::kOid;
    case 1115: return oid::kTimestamp;
    case 1182: return oid::kDate;
    case 1185: return oid::kTimestamptz;
    case 1231: return oid::kNumeric;
    case 199: return oid::kJson;
    case 2951: return oid::kUuid;
    case 3807: return oid::kJsonb;
    default: return 0;
  }
}

std::shared_ptr<arrow::DataType> MapPgType(uint32_t type_oid, int32_t typmod,
                                           NumericAs numeric_as) {
  switch (type_oid) {
    case oid::kBool: return arrow::boolean();
    case oid::kInt2: return arrow::int16();
    case oid::kInt4: return arrow::int32();
    case oid::kInt8:
    case oid::kOid: return arrow::int64();
    case oid::kFloat4: return arrow::float32();
    case oid::kFloat8: return arrow::float64();
    case oid::kBytea: return arrow::binary();
    case oid::kDate: return arrow::date32();
    case oid::kTimestamp: return arrow::timestamp(arrow::TimeUnit::MICRO);
    case oid::kTimestamptz: return arrow::timestamp(arrow::TimeUnit::MICRO, "UTC");
    case oid::kNumeric: {
      if (numeric_as == NumericAs::kFloat64) return arrow::float64();
      if (typmod < 4) return arrow::decimal128(38, 9);
      const int32_t precision = ((typmod - 4) >> 16) & 0xffff;
      const int32_t scale = (typmod - 4) & 0xffff;
      if (precision < 1 || precision > 38 || scale > precision) return arrow::utf8();
      return arrow::decimal128(precision, scale);
    }
    default:
      break;
  }
  if (const uint32_t element = ArrayElementOid(type_oid); element != 0) {
    return arrow::list(MapPgType(element, typmod, numeric_as));
  }
  return arrow::utf8();  // text, varchar, json, uuid, … and unmapped types (text form)
}

bool CompatibleTypeChange(const arrow::DataType& before, const arrow::DataType& after) {
  if (before.Equals(after)) return true;
  auto rank = [](arrow::Type::type id) {
    switch (id) {
      case arrow::Type::INT16: return 1;
      case arrow::Type::INT32: return 2;
      case arrow::Type::INT64: return 3;
      case arrow::Type::FLOAT: return 11;
      case arrow::Type::DOUBLE: return 12;
      default: return 0;
    }
  };
  const int a = rank(before.id()), b = rank(after.id());
  return a != 0 && b != 0 && a / 10 == b / 10 && b >= a;
}

void SplitCopyLine(std::string_view line, std::vector<PgValue>* fields, std::string* scratch) {
  fields->clear();
  scratch->clear();
  size_t start = 0;
  while (true) {
    size_t end = line.find('\t', start);
    if (end == std::string_view::npos) end = line.size();
    std::string_view field = line.substr(start, end - start);
    PgValue v;
    if (field == "\\N") {
      v.kind = 'n';
    } else if (field.find('\\') == std::string_view::npos) {
      v.kind = 't';
      v.text = field;
    } else {
      const size_t begin = scratch->size();
      for (size_t i = 0; i < field.size(); ++i) {
        char c = field[i];
        if (c == '\\' && i + 1 < field.size()) {
          char e = field[++i];
          switch (e) {
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'v': c = '\v'; break;
            default:
              if (e >= '0' && e <= '7') {
                int value = e - '0';
                for (int k = 0; k < 2 && i + 1 < field.size() && field[i + 1] >= '0' &&
                                field[i + 1] <= '7';
                     ++k) {
                  value = value * 8 + (field[++i] - '0');
                }
                c = static_cast<char>(value);
              } else {
                c = e;  // \\ and any other escaped character stand for themselves
              }
          }
        }
        scratch->push_back(c);
      }
      v.kind = 't';
      v.text = std::string_view(scratch->data() + begin, scratch->size() - begin);
    }
    fields->push_back(v);
    if (end == line.size()) break;
    start = end + 1;
  }
}

Result<NumericAs> ParseNumericAs(std::string_view text) {
  if (text == "decimal") return NumericAs::kDecimal;
  if (text == "float64") return NumericAs::kFloat64;
  return Status::Invalid("numeric_as must be 'decimal' or 'float64', got '", text, "'");
}

}  // namespace rill::pgcdc_internal
