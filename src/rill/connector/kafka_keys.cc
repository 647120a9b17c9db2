// KafkaConnector: message keys into key columns (kafka_connector_internal.h).
#include <string>
#include <unordered_map>

#include <arrow/api.h>
#include <arrow/compute/api.h>
#include <simdjson.h>

#include "rill/common/arrow_init.h"
#include "rill/common/json_text.h"
#include "rill/connector/kafka_connector_internal.h"

namespace rill {

Result<KafkaKeyFormat> ParseKafkaKeyFormat(std::string_view text) {
  if (text == "json") return KafkaKeyFormat::kJson;
  if (text == "string") return KafkaKeyFormat::kString;
  return Status::Invalid("unknown key_format '", std::string(text),
                         "': expected 'json' or 'string'");
}

namespace kafka_internal {

namespace {

namespace ondemand = simdjson::ondemand;

/// The table schema's primary-key metadata (table/schema.h's kPrimaryKeyMetadata;
/// connector/ may not include table/).
constexpr char kPrimaryKeyMetadata[] = "primary_key";

bool IsStringLike(const std::shared_ptr<arrow::DataType>& type) {
  return !type || arrow::is_base_binary_like(type->id());
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

/// A key object's {"schema", "payload"} wrapper (Debezium's JSON converter with
/// schemas): the payload's JSON text, else the key itself.
std::string Unwrap(std::string_view key) {
  if (key.find("\"payload\"") == std::string_view::npos) return std::string(key);
  simdjson::padded_string padded(key);
  ondemand::parser parser;
  ondemand::document doc;
  ondemand::object obj;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(obj)) return std::string(key);
  int fields = 0;
  bool has_schema = false;
  std::string payload;
  for (auto field_result : obj) {
    ondemand::field field;
    std::string_view name;
    if (std::move(field_result).get(field) || field.unescaped_key().get(name)) {
      return std::string(key);
    }
    ++fields;
    if (name == "schema") {
      has_schema = true;
    } else if (name == "payload") {
      ondemand::json_type type;
      std::string_view text;
      ondemand::object inner;
      if (field.value().type().get(type)) return std::string(key);
      if (type == ondemand::json_type::object) {
        if (field.value().get_object().get(inner) || inner.raw_json().get(text)) {
          return std::string(key);
        }
      } else {
        text = field.value().raw_json_token();
      }
      payload = std::string(Trim(text));
    }
  }
  if (fields == 2 && has_schema && !payload.empty()) return payload;
  return std::string(key);
}

}  // namespace

KeyReader::KeyReader(std::vector<std::string> columns, KafkaKeyFormat format)
    : columns_(std::move(columns)), format_(format) {}

KeyReader::~KeyReader() = default;

std::vector<std::string> KeyReader::Columns(
    const std::shared_ptr<arrow::Schema>& value_schema) const {
  if (!columns_.empty()) return columns_;
  if (format_ != KafkaKeyFormat::kString) return {};
  for (const auto* schema : {&value_schema, &table_schema_}) {
    if (!*schema || !(*schema)->metadata()) continue;
    auto pk = (*schema)->metadata()->Get(kPrimaryKeyMetadata);
    if (!pk.ok() || pk->empty() || pk->find(',') != std::string::npos) continue;
    return {*pk};
  }
  return {};
}

Result<KeyRows> KeyReader::Read(const std::vector<MessagePtr>& messages, size_t begin,
                                size_t end, const std::shared_ptr<arrow::Schema>& value_schema) {
  RILL_RETURN_NOT_OK(InitializeArrowCompute());
  const size_t n = end - begin;
  const std::vector<std::string> columns = Columns(value_schema);
  KeyRows out;
  out.errors.assign(n, "");
  // The key columns' types from the values' schema; inferred from the keys
  // while it does not know them all.
  std::vector<std::shared_ptr<arrow::Field>> fields;
  for (const auto& c : columns) {
    auto f = value_schema ? value_schema->GetFieldByName(c) : nullptr;
    if (!f) {
      fields.clear();
      break;
    }
    fields.push_back(f->WithNullable(true));
  }
  std::shared_ptr<arrow::Schema> wanted = fields.empty() ? nullptr : arrow::schema(fields);
  if (!decoder_ || !wanted || !key_schema_ || !key_schema_->Equals(*wanted)) {
    JsonDecodeOptions options;
    options.schema = wanted;
    options.row_offsets = true;
    RILL_ASSIGN_OR_RAISE(decoder_, JsonDecoder::Make(options));
    key_schema_ = wanted;
  }
  // One NDJSON record of the key columns per message.
  std::string data;
  std::unordered_map<int64_t, size_t> message_at;  // record offset -> message
  for (size_t k = 0; k < n; ++k) {
    const rd_kafka_message_t& m = *messages[begin + k];
    if (m.key == nullptr) {
      out.errors[k] = "the message has no key";
      continue;
    }
    std::string_view key(static_cast<const char*>(m.key), m.key_len);
    std::string record = "{";
    if (format_ == KafkaKeyFormat::kString) {
      if (columns.size() != 1) {
        out.errors[k] = "key_format 'string' needs one key column, got " +
                        std::to_string(columns.size());
        continue;
      }
      AppendJsonString(&record, columns[0]);
      record += ':';
      auto f = wanted ? wanted->field(0) : nullptr;
      if (IsStringLike(f ? f->type() : nullptr)) {
        AppendJsonString(&record, key);
      } else {
        record.append(Trim(key));  // a number or boolean column: the key's text
      }
      record += '}';
    } else {
      std::string_view text = Trim(key);
      if (text.empty()) {
        out.errors[k] = "the message key is empty (expected JSON)";
        continue;
      }
      std::string inner = text.front() == '{' ? Unwrap(text) : std::string(text);
      if (!inner.empty() && inner.front() == '{') {
        record = std::move(inner);
      } else if (columns.size() != 1) {
        out.errors[k] = "a key that is not a JSON object needs exactly one key column, got " +
                        std::to_string(columns.size());
        continue;
      } else {
        AppendJsonString(&record, columns[0]);
        record += ':';
        record += inner;
        record += '}';
      }
    }
    // Valid JSON has no raw line breaks inside strings: the record stays one line.
    for (char& c : record) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    message_at[static_cast<int64_t>(data.size())] = k;
    data += record;
    data += '\n';
  }
  RILL_ASSIGN_OR_RAISE(DecodeResult decoded, decoder_->Decode(data));
  for (const auto& r : decoded.rejects) {
    auto it = message_at.find(r.byte_offset);
    if (it != message_at.end()) out.errors[it->second] = "the message key: " + r.error;
  }
  // Rows by message: Take with a null index where a message has no row.
  arrow::Int64Builder indices;
  std::vector<int64_t> row_of(n, -1);
  for (size_t r = 0; r < decoded.row_offsets.size(); ++r) {
    auto it = message_at.find(decoded.row_offsets[r]);
    if (it != message_at.end()) row_of[it->second] = static_cast<int64_t>(r);
  }
  for (size_t k = 0; k < n; ++k) {
    RILL_RETURN_NOT_OK(row_of[k] >= 0 ? indices.Append(row_of[k]) : indices.AppendNull());
  }
  std::shared_ptr<arrow::Array> take;
  RILL_RETURN_NOT_OK(indices.Finish(&take));
  std::shared_ptr<arrow::RecordBatch> rows = decoded.batch;
  if (!rows) {
    std::vector<std::shared_ptr<arrow::Array>> empty;
    auto schema = decoder_->schema()
                      ? decoder_->schema()
                      : arrow::schema(std::vector<std::shared_ptr<arrow::Field>>{});
    for (const auto& f : schema->fields()) {
      RILL_ASSIGN_OR_RAISE(auto a, arrow::MakeEmptyArray(f->type()));
      empty.push_back(a);
    }
    rows = arrow::RecordBatch::Make(schema, 0, empty);
  }
  RILL_ASSIGN_OR_RAISE(auto taken, arrow::compute::Take(rows, take));
  out.rows = taken.record_batch();
  // A key row without one of the key columns (null) cannot delete or fill it.
  for (size_t k = 0; k < n; ++k) {
    if (!out.errors[k].empty()) continue;
    for (const auto& c : columns) {
      auto col = out.rows->GetColumnByName(c);
      if (!col || col->IsNull(static_cast<int64_t>(k))) {
        out.errors[k] = "the message key has no value for key column '" + c + "'";
        break;
      }
    }
  }
  return out;
}

Result<std::shared_ptr<arrow::RecordBatch>> FillKeyColumns(
    const std::shared_ptr<arrow::RecordBatch>& rows, const std::vector<int64_t>& row_messages,
    const KeyRows& keys) {
  RILL_RETURN_NOT_OK(InitializeArrowCompute());
  std::shared_ptr<arrow::RecordBatch> out = rows;
  std::shared_ptr<arrow::Array> take;
  for (const auto& key_field : keys.rows->schema()->fields()) {
    const int at = out->schema()->GetFieldIndex(key_field->name());
    if (at < 0 || out->column(at)->null_count() == 0) continue;
    if (!take) {
      arrow::Int64Builder b;
      RILL_RETURN_NOT_OK(b.AppendValues(row_messages));
      RILL_RETURN_NOT_OK(b.Finish(&take));
    }
    RILL_ASSIGN_OR_RAISE(auto values,
                         arrow::compute::Take(keys.rows->GetColumnByName(key_field->name()), take));
    auto col = out->column(at);
    if (!values.type()->Equals(*col->type())) {
      RILL_ASSIGN_OR_RAISE(values, arrow::compute::Cast(values, col->type()));
    }
    RILL_ASSIGN_OR_RAISE(auto filled,
                         arrow::compute::CallFunction("coalesce", {col, values}));
    RILL_ASSIGN_OR_RAISE(out, out->SetColumn(at, out->schema()->field(at), filled.make_array()));
  }
  return out;
}

}  // namespace kafka_internal
}  // namespace rill
