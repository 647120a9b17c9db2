// Change rows as Kafka message keys and JSON values.
#include <charconv>

#include <arrow/array.h>
#include <arrow/record_batch.h>
#include <arrow/scalar.h>
#include <arrow/type.h>

#include "rill/common/arrow_json.h"
#include "rill/connector/avro_decoder.h"
#include "rill/connector/avro_schema.h"
#include "rill/sink/kafka_sink_internal.h"

namespace rill::kafka_sink_internal {

namespace {

// The Kafka sink's JSON: strings made valid UTF-8 (a consumer's JSON parser
// would refuse the whole message), floats in their shortest round-trip text.
constexpr ArrowJsonOptions kKafkaJson{/*replace_invalid_utf8=*/true, JsonFloatFormat::kShortest};

void AppendString(std::string_view text, std::string* out) {
  AppendArrowJsonString(text, kKafkaJson.replace_invalid_utf8, out);
}

Status AppendValue(const arrow::Array& array, int64_t i, std::string* out) {
  return AppendArrowJsonValue(array, i, kKafkaJson, out);
}

/// A key column's value as the key itself (key_format="string"): strings as
/// their bytes, numbers as decimal text, anything else as Arrow prints it.
Status AppendKeyText(const arrow::Array& array, int64_t i, std::string* out) {
  using arrow::Type;
  switch (array.type_id()) {
    case Type::STRING: {
      auto v = static_cast<const arrow::StringArray&>(array).GetView(i);
      out->append(v.data(), v.size());
      return Status::OK();
    }
    case Type::LARGE_STRING: {
      auto v = static_cast<const arrow::LargeStringArray&>(array).GetView(i);
      out->append(v.data(), v.size());
      return Status::OK();
    }
    case Type::STRING_VIEW: {
      auto v = static_cast<const arrow::StringViewArray&>(array).GetView(i);
      out->append(v.data(), v.size());
      return Status::OK();
    }
    case Type::DICTIONARY: {
      const auto& dict = static_cast<const arrow::DictionaryArray&>(array);
      return AppendKeyText(*dict.dictionary(), dict.GetValueIndex(i), out);
    }
    case Type::BOOL: case Type::INT8: case Type::INT16: case Type::INT32: case Type::INT64:
    case Type::UINT8: case Type::UINT16: case Type::UINT32: case Type::UINT64:
    case Type::FLOAT: case Type::DOUBLE:
      return AppendValue(array, i, out);
    default: {
      RILL_ASSIGN_OR_RAISE(auto scalar, array.GetScalar(i));
      out->append(scalar->ToString());
      return Status::OK();
    }
  }
}

}  // namespace

Result<const MessageEncoder::Layout*> MessageEncoder::LayoutOf(const arrow::RecordBatch& batch) {
  const auto& schema = batch.schema();
  if (cached_layout_ && (schema == cached_schema_ || schema->Equals(*cached_schema_))) {
    return cached_layout_.get();
  }
  auto layout = std::make_shared<Layout>();
  layout->op = schema->GetFieldIndex(kChangeOpColumn);
  const int version = schema->GetFieldIndex(kChangeVersionColumn);
  if (layout->op < 0 || version < 0 ||
      schema->field(layout->op)->type()->id() != arrow::Type::STRING) {
    return Status::Invalid("KafkaSink: a change batch lacks the ", kChangeOpColumn, " (utf8) or ",
                           kChangeVersionColumn, " column");
  }
  for (const auto& name : key_columns_) {
    const int index = schema->GetFieldIndex(name);
    if (index < 0) {
      return Status::KeyError("KafkaSink: key column '", name, "' is not a column of the table");
    }
    layout->key.push_back(index);
  }
  if (!partition_column_.empty()) {
    layout->partition = schema->GetFieldIndex(partition_column_);
    if (layout->partition < 0 ||
        schema->field(layout->partition)->type()->id() != arrow::Type::INT32) {
      return Status::KeyError("KafkaSink: partition column '", partition_column_,
                              "' is not an int32 column of the table");
    }
  }
  for (int c = 0; c < schema->num_fields(); ++c) {
    std::string name;
    AppendString(schema->field(c)->name(), &name);
    name.push_back(':');
    layout->names.push_back(std::move(name));
    layout->changelog.push_back(c);
    if (c != layout->op && c != version) layout->value.push_back(c);
  }
  cached_schema_ = schema;
  cached_layout_ = std::move(layout);
  avro_ids_[0] = avro_ids_[1] = -1;
  return cached_layout_.get();
}

Status MessageEncoder::PrepareAvro(const arrow::RecordBatch& batch, const Layout& layout,
                                   SinkMode mode) {
  const bool changelog = mode == SinkMode::kChangelog;
  int32_t& id = avro_ids_[changelog ? 1 : 0];
  if (id < 0) {
    arrow::FieldVector fields;
    for (int c : changelog ? layout.changelog : layout.value) {
      fields.push_back(batch.schema()->field(c));
    }
    auto json = ArrowToAvroSchemaJson(arrow::Schema(std::move(fields)), record_name_);
    if (!json.ok()) {
      return json.status().WithMessage("KafkaSink format=\"avro\": ", json.status().message());
    }
    RILL_ASSIGN_OR_RAISE(id, registry_->Register(subject_, *json));
  }
  avro_id_ = id;
  return Status::OK();
}

Result<bool> MessageEncoder::EncodeRow(const arrow::RecordBatch& batch, const Layout& layout,
                                       int64_t row, SinkMode mode, EncodedMessage* out) {
  const auto& ops = static_cast<const arrow::StringArray&>(*batch.column(layout.op));
  const std::string_view op = ops.GetView(row);
  const bool is_delete = op == "delete";
  if (mode == SinkMode::kAppend && op != "insert") return false;
  if (mode == SinkMode::kUpsert && op == "update_before") return false;

  out->partition = -1;
  if (layout.partition >= 0 && !batch.column(layout.partition)->IsNull(row)) {
    out->partition = batch.column(layout.partition)->data()->GetValues<int32_t>(1)[row];
  }
  out->key.reset();
  if (!layout.key.empty()) {
    key_.clear();
    if (key_as_string_) {
      const auto& column = *batch.column(layout.key[0]);
      if (!column.IsNull(row)) {
        RILL_RETURN_NOT_OK(AppendKeyText(column, row, &key_));
        out->key = std::string_view(key_);
      }
    } else {
      key_.push_back('{');
      for (size_t k = 0; k < layout.key.size(); ++k) {
        if (k > 0) key_.push_back(',');
        key_.append(layout.names[layout.key[k]]);
        RILL_RETURN_NOT_OK(AppendValue(*batch.column(layout.key[k]), row, &key_));
      }
      key_.push_back('}');
      out->key = std::string_view(key_);
    }
  }

  out->value.reset();
  if (mode == SinkMode::kUpsert && is_delete) return true;  // a tombstone
  const auto& columns = mode == SinkMode::kChangelog ? layout.changelog : layout.value;
  value_.clear();
  if (registry_) {
    AppendConfluentHeader(avro_id_, &value_);
    for (int c : columns) RILL_RETURN_NOT_OK(AppendAvroField(*batch.column(c), row, &value_));
    out->value = std::string_view(value_);
    return true;
  }
  value_.push_back('{');
  for (size_t k = 0; k < columns.size(); ++k) {
    if (k > 0) value_.push_back(',');
    value_.append(layout.names[columns[k]]);
    RILL_RETURN_NOT_OK(AppendValue(*batch.column(columns[k]), row, &value_));
  }
  value_.push_back('}');
  out->value = std::string_view(value_);
  return true;
}

std::string FormatProgress(const SinkProgress& progress) {
  return "rill:v=" + std::to_string(progress.version) + ";e=" + std::to_string(progress.epoch);
}

Result<SinkProgress> ParseProgress(std::string_view metadata) {
  auto bad = [&] {
    return Status::Invalid("offset metadata '", metadata,
                           "' is not a rill sink's progress (rill:v=<version>;e=<epoch>)");
  };
  constexpr std::string_view kVersion = "rill:v=";
  constexpr std::string_view kEpoch = ";e=";
  if (metadata.substr(0, kVersion.size()) != kVersion) return bad();
  const char* p = metadata.data() + kVersion.size();
  const char* end = metadata.data() + metadata.size();
  SinkProgress out;
  auto v = std::from_chars(p, end, out.version);
  if (v.ec != std::errc() || v.ptr == p) return bad();
  p = v.ptr;
  if (std::string_view(p, end - p).substr(0, kEpoch.size()) != kEpoch) return bad();
  p += kEpoch.size();
  auto e = std::from_chars(p, end, out.epoch);
  if (e.ec != std::errc() || e.ptr == p || e.ptr != end) return bad();
  return out;
}

}  // namespace rill::kafka_sink_internal
