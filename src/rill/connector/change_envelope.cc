// Debezium change envelopes and operation names (change_envelope_internal.h).
#include "rill/connector/change_envelope_internal.h"

#include <algorithm>
#include <cctype>

#include "rill/connector/json_convert_internal.h"

namespace rill::json_internal {

namespace ondemand = simdjson::ondemand;
using simdjson::error_code;

namespace {

/// The fields of an envelope seen so far.
struct Fields {
  bool has_op = false;
  std::string op;
  int before = 0;  ///< 0: absent, 1: null, 2: an object (in before_text)
  int after = 0;
  std::string_view before_text;
  std::string_view after_text;
  bool has_source = false;
  bool has_ts = false;
  int64_t ts_ms = 0;
  bool has_payload = false;
};

Status JsonError(error_code err) { return Status::Invalid(JsonErrorMessage(err)); }

/// Read before/after: an object (its text) or null.
Status ReadRow(ondemand::value value, std::string_view name, int* state,
               std::string_view* text) {
  if (*state != 0) return Status::Invalid("duplicate field '", name, "'");
  JsonScalar s;
  if (error_code err = ReadScalar(value, &s)) return JsonError(err);
  if (s.type == JsonScalar::kNull) {
    *state = 1;
    return Status::OK();
  }
  if (s.type != JsonScalar::kObject) {
    return Status::Invalid("field '", name, "' must be an object or null, ", Describe(s));
  }
  *state = 2;
  *text = s.text;
  return Status::OK();
}

/// Read `source` for its ts_ms (other fields skipped).
Status ReadSource(ondemand::value value, Fields* f) {
  if (f->has_source) return Status::Invalid("duplicate field 'source'");
  f->has_source = true;
  ondemand::json_type type;
  if (error_code err = value.type().get(type)) return JsonError(err);
  if (type == ondemand::json_type::null) {
    bool is_null = false;
    if (error_code err = value.is_null().get(is_null)) return JsonError(err);
    return Status::OK();
  }
  ondemand::object source;
  if (type != ondemand::json_type::object || value.get_object().get(source)) {
    JsonScalar s;
    if (ReadScalar(value, &s) == simdjson::SUCCESS) {
      return Status::Invalid("field 'source' must be an object, ", Describe(s));
    }
    return Status::Invalid("field 'source' must be an object");
  }
  for (auto field_result : source) {
    ondemand::field field;
    std::string_view key;
    error_code err;
    if ((err = std::move(field_result).get(field)) || (err = field.unescaped_key().get(key))) {
      return JsonError(err);
    }
    if (key != "ts_ms") continue;  // On-Demand skips the value
    if (f->has_ts) return Status::Invalid("duplicate field 'source.ts_ms'");
    JsonScalar s;
    if ((err = ReadScalar(field.value(), &s))) return JsonError(err);
    if (s.type == JsonScalar::kNull) continue;
    if (s.type != JsonScalar::kInt) {
      return Status::Invalid("field 'source.ts_ms' must be an integer (milliseconds since "
                             "the epoch), ", Describe(s));
    }
    f->has_ts = true;
    f->ts_ms = s.i;
  }
  return Status::OK();
}

/// Read the fields of the envelope object `obj` (top: the record itself, where
/// a `payload` holds the envelope of the schema/payload wrapper).
Status ReadFields(ondemand::object obj, bool top, Fields* f) {
  for (auto field_result : obj) {
    ondemand::field field;
    std::string_view key;
    error_code err;
    if ((err = std::move(field_result).get(field)) || (err = field.unescaped_key().get(key))) {
      return JsonError(err);
    }
    if (key == "op") {
      if (f->has_op) return Status::Invalid("duplicate field 'op'");
      JsonScalar s;
      if ((err = ReadScalar(field.value(), &s))) return JsonError(err);
      if (s.type != JsonScalar::kString) {
        return Status::Invalid("field 'op' must be a string, ", Describe(s));
      }
      f->has_op = true;
      f->op = std::string(s.text);  // the parser's string buffer: copied
    } else if (key == "before") {
      RILL_RETURN_NOT_OK(ReadRow(field.value(), "before", &f->before, &f->before_text));
    } else if (key == "after") {
      RILL_RETURN_NOT_OK(ReadRow(field.value(), "after", &f->after, &f->after_text));
    } else if (key == "source") {
      RILL_RETURN_NOT_OK(ReadSource(field.value(), f));
    } else if (key == "payload" && top) {
      if (f->has_payload) return Status::Invalid("duplicate field 'payload'");
      f->has_payload = true;
      ondemand::object payload;
      ondemand::json_type type;
      if ((err = field.value().type().get(type))) return JsonError(err);
      if (type != ondemand::json_type::object || field.value().get_object().get(payload)) {
        return Status::Invalid(
            "field 'payload' must be an object (the change event of the schema/payload "
            "wrapper)");
      }
      RILL_RETURN_NOT_OK(ReadFields(payload, /*top=*/false, f));
    }
    // Other fields (schema, ts_ms, transaction, ...) are skipped by On-Demand.
  }
  return Status::OK();
}

}  // namespace

Status ParseDebeziumEnvelope(ondemand::parser* parser, std::string_view record,
                             size_t capacity, ChangeEnvelope* out) {
  ondemand::document doc;
  error_code err = parser->iterate(record.data(), record.size(), capacity).get(doc);
  if (err) return JsonError(err);
  ondemand::object obj;
  err = doc.get_object().get(obj);
  if (err == simdjson::INCORRECT_TYPE) {
    return Status::Invalid("expected a JSON object (a Debezium change event)");
  }
  if (err) return JsonError(err);
  Fields f;
  RILL_RETURN_NOT_OK(ReadFields(obj, /*top=*/true, &f));
  if (doc.current_location().error() == simdjson::SUCCESS) {
    return Status::Invalid("unexpected content after the object");
  }
  if (!f.has_op) {
    return Status::Invalid(f.has_payload ? "the payload has no field 'op'"
                                         : "missing field 'op' (not a Debezium change event: "
                                           "expected {\"before\", \"after\", \"op\", "
                                           "\"source\"}, optionally inside "
                                           "{\"schema\", \"payload\"})");
  }
  *out = ChangeEnvelope{};
  out->has_ts = f.has_ts;
  out->ts_ms = f.ts_ms;
  const std::string& op = f.op;
  if (op == "c" || op == "u" || op == "r") {
    if (f.after != 2) {
      return Status::Invalid("op '", op, "' needs an 'after' object (the row), got ",
                             f.after == 0 ? "none" : "null");
    }
    out->op = OpCode::kUpsert;
    out->row = f.after_text;
  } else if (op == "d") {
    if (f.before != 2) {
      return Status::Invalid("op 'd' needs a 'before' object (the deleted row's key), got ",
                             f.before == 0 ? "none" : "null");
    }
    out->op = OpCode::kDelete;
    out->row = f.before_text;
  } else if (op == "t") {
    out->op = OpCode::kTruncate;
  } else {
    return Status::Invalid("unknown op '", op, "' (Debezium's ops: c, u, d, r, t)");
  }
  return Status::OK();
}

}  // namespace rill::json_internal
