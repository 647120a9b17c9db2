// AvroSchema: the schema parser (simdjson DOM) and the Avro <-> Arrow type mapping.
#include "rill/connector/avro_schema.h"

#include <map>
#include <set>

#include <arrow/type.h>
#include <simdjson.h>

namespace rill {

namespace dom = simdjson::dom;

namespace {

constexpr int kMaxSchemaDepth = 64;

bool ValidName(std::string_view name) {
  if (name.empty()) return false;
  auto start = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!start(name[0])) return false;
  for (char c : name) {
    if (!start(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool ValidFullName(std::string_view name) {
  size_t start = 0;
  while (true) {
    size_t dot = name.find('.', start);
    if (!ValidName(name.substr(start, dot - start))) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

std::optional<AvroType> PrimitiveType(std::string_view name) {
  if (name == "null") return AvroType::kNull;
  if (name == "boolean") return AvroType::kBoolean;
  if (name == "int") return AvroType::kInt;
  if (name == "long") return AvroType::kLong;
  if (name == "float") return AvroType::kFloat;
  if (name == "double") return AvroType::kDouble;
  if (name == "bytes") return AvroType::kBytes;
  if (name == "string") return AvroType::kString;
  return std::nullopt;
}

}  // namespace

std::string AvroJsonQuote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          static const char* kHex = "0123456789abcdef";
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

struct AvroSchema::Builder {
  AvroSchema* schema;
  std::map<std::string, const AvroNode*, std::less<>> named;

  AvroNode* New() {
    schema->nodes_.push_back(std::make_unique<AvroNode>());
    return schema->nodes_.back().get();
  }

  const AvroNode* Primitive(AvroType t) {
    AvroNode* n = New();
    n->type = t;
    return n;
  }

  Result<const AvroNode*> Reference(std::string_view name, const std::string& ns) {
    if (auto p = PrimitiveType(name)) return Primitive(*p);
    auto it = named.find(name);
    if (it == named.end() && name.find('.') == std::string_view::npos && !ns.empty()) {
      it = named.find(ns + "." + std::string(name));
    }
    if (it == named.end()) return Status::Invalid("unknown Avro type '", name, "'");
    return it->second;
  }

  /// The full name of a named type, and its namespace for the names inside.
  Result<std::string> FullName(dom::object obj, const std::string& ns, std::string* inner_ns) {
    std::string_view name;
    if (obj["name"].get_string().get(name)) return Status::Invalid("a named type without a name");
    std::string full(name);
    if (name.find('.') == std::string_view::npos) {
      std::string_view given;
      if (!obj["namespace"].get_string().get(given)) {
        full = given.empty() ? full : std::string(given) + "." + full;
      } else if (!ns.empty()) {
        full = ns + "." + full;
      }
    }
    if (!ValidFullName(full)) return Status::Invalid("bad Avro name '", full, "'");
    if (named.count(full)) return Status::Invalid("Avro type '", full, "' defined twice");
    size_t dot = full.rfind('.');
    *inner_ns = dot == std::string::npos ? std::string() : full.substr(0, dot);
    return full;
  }

  void ReadLogical(dom::object obj, AvroNode* n) {
    std::string_view logical;
    if (obj["logicalType"].get_string().get(logical)) return;
    const AvroType t = n->type;
    if (logical == "decimal" && (t == AvroType::kBytes || t == AvroType::kFixed)) {
      int64_t precision = 0, scale = 0;
      if (obj["precision"].get_int64().get(precision) || precision <= 0) return;
      if (auto s = obj["scale"]; s.error() != simdjson::NO_SUCH_FIELD) {
        if (s.get_int64().get(scale)) return;
      }
      if (scale < 0 || scale > precision) return;
      if (t == AvroType::kFixed && n->size < 1) return;
      n->logical = AvroLogical::kDecimal;
      n->precision = static_cast<int32_t>(precision);
      n->scale = static_cast<int32_t>(scale);
    } else if (logical == "date" && t == AvroType::kInt) {
      n->logical = AvroLogical::kDate;
    } else if (logical == "time-millis" && t == AvroType::kInt) {
      n->logical = AvroLogical::kTimeMillis;
    } else if (logical == "time-micros" && t == AvroType::kLong) {
      n->logical = AvroLogical::kTimeMicros;
    } else if (logical == "timestamp-millis" && t == AvroType::kLong) {
      n->logical = AvroLogical::kTimestampMillis;
    } else if (logical == "timestamp-micros" && t == AvroType::kLong) {
      n->logical = AvroLogical::kTimestampMicros;
    } else if (logical == "local-timestamp-millis" && t == AvroType::kLong) {
      n->logical = AvroLogical::kLocalTimestampMillis;
    } else if (logical == "local-timestamp-micros" && t == AvroType::kLong) {
      n->logical = AvroLogical::kLocalTimestampMicros;
    } else if (logical == "uuid" &&
               (t == AvroType::kString || (t == AvroType::kFixed && n->size == 16))) {
      n->logical = AvroLogical::kUuid;
    } else if (logical == "duration" && t == AvroType::kFixed && n->size == 12) {
      n->logical = AvroLogical::kDuration;
    }
  }

  Result<const AvroNode*> Parse(dom::element e, const std::string& ns, int depth) {
    if (depth > kMaxSchemaDepth) return Status::Invalid("Avro schema nested too deeply");
    std::string_view text;
    if (!e.get_string().get(text)) return Reference(text, ns);
    dom::array arr;
    if (!e.get_array().get(arr)) return ParseUnion(arr, ns, depth);
    dom::object obj;
    if (e.get_object().get(obj)) return Status::Invalid("an Avro schema must be a string, object or array");
    std::string_view type;
    if (obj["type"].get_string().get(type)) {
      dom::element inner;
      if (!obj["type"].get(inner)) return Parse(inner, ns, depth + 1);
      return Status::Invalid("an Avro schema object without a \"type\"");
    }
    if (auto p = PrimitiveType(type)) {
      AvroNode* n = New();
      n->type = *p;
      ReadLogical(obj, n);
      return n;
    }
    if (type == "record" || type == "error") return ParseRecord(obj, ns, depth);
    if (type == "enum") return ParseEnum(obj, ns);
    if (type == "fixed") return ParseFixed(obj, ns);
    if (type == "array" || type == "map") {
      AvroNode* n = New();
      n->type = type == "array" ? AvroType::kArray : AvroType::kMap;
      dom::element inner;
      if (obj[type == "array" ? "items" : "values"].get(inner)) {
        return Status::Invalid("Avro ", type, " without \"", type == "array" ? "items" : "values",
                               "\"");
      }
      RILL_ASSIGN_OR_RAISE(n->items, Parse(inner, ns, depth + 1));
      return n;
    }
    return Reference(type, ns);
  }

  Result<const AvroNode*> ParseUnion(dom::array arr, const std::string& ns, int depth) {
    AvroNode* n = New();
    n->type = AvroType::kUnion;
    std::set<std::string> seen;
    for (dom::element b : arr) {
      RILL_ASSIGN_OR_RAISE(const AvroNode* branch, Parse(b, ns, depth + 1));
      if (branch->type == AvroType::kUnion) return Status::Invalid("a union inside a union");
      std::string key = branch->name.empty() ? std::to_string(static_cast<int>(branch->type))
                                             : branch->name;
      if (!seen.insert(key).second) return Status::Invalid("a union with two branches of one type");
      if (branch->type == AvroType::kNull) n->null_branch = static_cast<int32_t>(n->branches.size());
      n->branches.push_back(branch);
    }
    if (n->branches.empty()) return Status::Invalid("an empty union");
    return n;
  }

  Result<const AvroNode*> ParseRecord(dom::object obj, const std::string& ns, int depth) {
    std::string inner_ns;
    AvroNode* n = New();
    n->type = AvroType::kRecord;
    RILL_ASSIGN_OR_RAISE(n->name, FullName(obj, ns, &inner_ns));
    named[n->name] = n;  // before the fields: they may refer to the record
    dom::array fields;
    if (obj["fields"].get_array().get(fields)) {
      return Status::Invalid("record '", n->name, "' without a \"fields\" array");
    }
    std::set<std::string, std::less<>> names;
    for (dom::element f : fields) {
      dom::object fo;
      std::string_view name;
      dom::element type;
      if (f.get_object().get(fo) || fo["name"].get_string().get(name) || fo["type"].get(type)) {
        return Status::Invalid("record '", n->name, "': a field needs a name and a type");
      }
      if (!ValidName(name)) return Status::Invalid("record '", n->name, "': bad field name '", name, "'");
      if (!names.insert(std::string(name)).second) {
        return Status::Invalid("record '", n->name, "': field '", name, "' twice");
      }
      AvroField field;
      field.name = std::string(name);
      auto typed = Parse(type, inner_ns, depth + 1);
      if (!typed.ok()) {
        return Status::Invalid("record '", n->name, "', field '", name, "': ",
                               typed.status().message());
      }
      field.type = *typed;
      dom::element def;
      if (!fo["default"].get(def)) field.default_json = simdjson::minify(def);
      n->fields.push_back(std::move(field));
    }
    return n;
  }

  Result<const AvroNode*> ParseEnum(dom::object obj, const std::string& ns) {
    std::string inner_ns;
    AvroNode* n = New();
    n->type = AvroType::kEnum;
    RILL_ASSIGN_OR_RAISE(n->name, FullName(obj, ns, &inner_ns));
    dom::array symbols;
    if (obj["symbols"].get_array().get(symbols)) {
      return Status::Invalid("enum '", n->name, "' without a \"symbols\" array");
    }
    std::set<std::string, std::less<>> seen;
    for (dom::element s : symbols) {
      std::string_view sym;
      if (s.get_string().get(sym) || !ValidName(sym) || !seen.insert(std::string(sym)).second) {
        return Status::Invalid("enum '", n->name, "': bad or repeated symbol");
      }
      n->symbols.emplace_back(sym);
    }
    named[n->name] = n;
    return n;
  }

  Result<const AvroNode*> ParseFixed(dom::object obj, const std::string& ns) {
    std::string inner_ns;
    AvroNode* n = New();
    n->type = AvroType::kFixed;
    RILL_ASSIGN_OR_RAISE(n->name, FullName(obj, ns, &inner_ns));
    int64_t size = 0;
    if (obj["size"].get_int64().get(size) || size < 0 || size > (1 << 20)) {
      return Status::Invalid("fixed '", n->name, "' needs a size in [0, 2^20]");
    }
    n->size = static_cast<int32_t>(size);
    ReadLogical(obj, n);
    named[n->name] = n;
    return n;
  }
};

Result<std::shared_ptr<const AvroSchema>> AvroSchema::Parse(std::string_view json) {
  std::shared_ptr<AvroSchema> schema(new AvroSchema());
  schema->json_ = std::string(json);
  dom::parser parser;
  dom::element doc;
  if (auto err = parser.parse(schema->json_).get(doc)) {
    return Status::Invalid("Avro schema: not JSON (", simdjson::error_message(err), ")");
  }
  Builder b{schema.get(), {}};
  auto root = b.Parse(doc, "", 0);
  if (!root.ok()) return Status::Invalid("Avro schema: ", root.status().message());
  schema->root_ = *root;
  return std::shared_ptr<const AvroSchema>(std::move(schema));
}

Result<std::shared_ptr<arrow::DataType>> AvroToArrowType(const AvroNode& n, int depth) {
  if (depth > kMaxSchemaDepth) {
    return Status::Invalid("Avro type '", n.name, "' is recursive: no Arrow type for it");
  }
  switch (n.logical) {
    case AvroLogical::kDecimal:
      if (n.precision <= 38) return arrow::decimal128(n.precision, n.scale);
      return arrow::utf8();
    case AvroLogical::kDate: return arrow::date32();
    case AvroLogical::kTimeMillis: return arrow::time32(arrow::TimeUnit::MILLI);
    case AvroLogical::kTimeMicros: return arrow::time64(arrow::TimeUnit::MICRO);
    case AvroLogical::kTimestampMillis: return arrow::timestamp(arrow::TimeUnit::MILLI, "UTC");
    case AvroLogical::kTimestampMicros: return arrow::timestamp(arrow::TimeUnit::MICRO, "UTC");
    case AvroLogical::kLocalTimestampMillis: return arrow::timestamp(arrow::TimeUnit::MILLI);
    case AvroLogical::kLocalTimestampMicros: return arrow::timestamp(arrow::TimeUnit::MICRO);
    case AvroLogical::kUuid: return arrow::utf8();
    default: break;
  }
  switch (n.type) {
    case AvroType::kNull: return arrow::utf8();
    case AvroType::kBoolean: return arrow::boolean();
    case AvroType::kInt: return arrow::int32();
    case AvroType::kLong: return arrow::int64();
    case AvroType::kFloat: return arrow::float32();
    case AvroType::kDouble: return arrow::float64();
    case AvroType::kBytes:
    case AvroType::kFixed: return arrow::binary();
    case AvroType::kString:
    case AvroType::kEnum: return arrow::utf8();
    case AvroType::kRecord: {
      arrow::FieldVector fields;
      for (const auto& f : n.fields) {
        RILL_ASSIGN_OR_RAISE(auto t, AvroToArrowType(*f.type, depth + 1));
        fields.push_back(arrow::field(f.name, t));
      }
      return arrow::struct_(std::move(fields));
    }
    case AvroType::kArray: {
      RILL_ASSIGN_OR_RAISE(auto t, AvroToArrowType(*n.items, depth + 1));
      return arrow::list(t);
    }
    case AvroType::kMap: {
      RILL_ASSIGN_OR_RAISE(auto t, AvroToArrowType(*n.items, depth + 1));
      return arrow::map(arrow::utf8(), t);
    }
    case AvroType::kUnion:
      if (n.branches.size() == 2 && n.null_branch >= 0) {
        return AvroToArrowType(*n.branches[1 - n.null_branch], depth + 1);
      }
      if (n.branches.size() == 1) return AvroToArrowType(*n.branches[0], depth + 1);
      return arrow::utf8();
  }
  return arrow::utf8();
}

Result<std::shared_ptr<arrow::Schema>> AvroSchema::ToArrowSchema() const {
  if (root_->type != AvroType::kRecord) {
    return Status::Invalid("Avro schema: the top-level type must be a record to map to a table");
  }
  RILL_ASSIGN_OR_RAISE(auto t, AvroToArrowType(*root_));
  return arrow::schema(t->fields());
}

// Arrow -> Avro ---------------------------------------------------------------------

namespace {

Result<std::string> AvroTypeJson(const arrow::DataType& t, const std::string& name, int* counter) {
  using arrow::Type;
  switch (t.id()) {
    case Type::BOOL: return std::string("\"boolean\"");
    case Type::INT8:
    case Type::INT16:
    case Type::INT32:
    case Type::UINT8:
    case Type::UINT16: return std::string("\"int\"");
    case Type::INT64:
    case Type::UINT32:
    case Type::UINT64: return std::string("\"long\"");
    case Type::FLOAT: return std::string("\"float\"");
    case Type::DOUBLE: return std::string("\"double\"");
    case Type::STRING:
    case Type::LARGE_STRING: return std::string("\"string\"");
    case Type::BINARY:
    case Type::LARGE_BINARY:
    case Type::FIXED_SIZE_BINARY: return std::string("\"bytes\"");
    case Type::DATE32:
    case Type::DATE64: return std::string(R"({"type":"int","logicalType":"date"})");
    case Type::TIMESTAMP: {
      const auto& ts = static_cast<const arrow::TimestampType&>(t);
      const bool local = ts.timezone().empty();
      const bool millis = ts.unit() == arrow::TimeUnit::SECOND || ts.unit() == arrow::TimeUnit::MILLI;
      std::string logical = std::string(local ? "local-" : "") + "timestamp-" +
                            (millis ? "millis" : "micros");
      return R"({"type":"long","logicalType":")" + logical + "\"}";
    }
    case Type::DECIMAL128: {
      const auto& d = static_cast<const arrow::Decimal128Type&>(t);
      return R"({"type":"bytes","logicalType":"decimal","precision":)" +
             std::to_string(d.precision()) + ",\"scale\":" + std::to_string(d.scale()) + "}";
    }
    case Type::DICTIONARY:
      return AvroTypeJson(*static_cast<const arrow::DictionaryType&>(t).value_type(), name,
                          counter);
    case Type::STRUCT: {
      std::string out = R"({"type":"record","name":")" + name + "_" +
                        std::to_string((*counter)++) + R"(","fields":[)";
      for (int i = 0; i < t.num_fields(); ++i) {
        const auto& f = t.field(i);
        RILL_ASSIGN_OR_RAISE(auto ft, AvroTypeJson(*f->type(), name, counter));
        if (i) out += ',';
        out += "{\"name\":" + AvroJsonQuote(f->name()) + ",\"type\":[\"null\"," + ft +
               "],\"default\":null}";
      }
      return out + "]}";
    }
    case Type::LIST:
    case Type::LARGE_LIST: {
      RILL_ASSIGN_OR_RAISE(auto it, AvroTypeJson(*t.field(0)->type(), name, counter));
      return R"({"type":"array","items":["null",)" + it + "]}";
    }
    case Type::MAP: {
      const auto& m = static_cast<const arrow::MapType&>(t);
      if (m.key_type()->id() != Type::STRING && m.key_type()->id() != Type::LARGE_STRING) {
        return Status::NotImplemented("an Avro map needs string keys, not ", m.key_type()->ToString());
      }
      RILL_ASSIGN_OR_RAISE(auto it, AvroTypeJson(*m.item_type(), name, counter));
      return R"({"type":"map","values":["null",)" + it + "]}";
    }
    default:
      return Status::NotImplemented("no Avro type for Arrow ", t.ToString());
  }
}

}  // namespace

Result<std::string> ArrowToAvroSchemaJson(const arrow::Schema& schema,
                                          const std::string& record_name) {
  std::string name;
  for (char c : record_name) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || (c >= '0' && c <= '9');
    name += ok ? c : '_';
  }
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) name = "r_" + name;
  int counter = 0;
  std::string out = R"({"type":"record","name":")" + name + R"(","fields":[)";
  for (int i = 0; i < schema.num_fields(); ++i) {
    const auto& f = schema.field(i);
    if (!ValidName(f->name())) {
      return Status::NotImplemented("column '", f->name(), "' is not a valid Avro field name");
    }
    auto ft = AvroTypeJson(*f->type(), name, &counter);
    if (!ft.ok()) return ft.status().WithMessage("column '", f->name(), "': ", ft.status().message());
    if (i) out += ',';
    out += "{\"name\":" + AvroJsonQuote(f->name()) + ",\"type\":[\"null\"," + *ft +
           "],\"default\":null}";
  }
  return out + "]}";
}

}  // namespace rill
