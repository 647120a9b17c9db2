#include "rill/table/schema.h"

#include <algorithm>
#include <cctype>

#include <arrow/type.h>
#include <arrow/util/key_value_metadata.h>

namespace rill {

namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<std::string> MetadataValue(const arrow::Schema& schema, const std::string& key) {
  const auto& md = schema.metadata();
  if (!md) {
    return std::nullopt;
  }
  int i = md->FindKey(key);
  if (i < 0) {
    return std::nullopt;
  }
  return md->value(i);
}

}  // namespace

Result<TableMode> ParseTableMode(std::string_view text) {
  std::string mode = Lower(Trim(text));
  if (mode == "snapshot" || mode == "upsert") {
    return TableMode::kSnapshot;
  }
  if (mode == "append") {
    return TableMode::kAppend;
  }
  return Status::Invalid("Unknown table mode '", text,
                         "': expected 'snapshot', 'upsert' or 'append'");
}

const char* TableModeName(TableMode mode) {
  return mode == TableMode::kAppend ? "append" : "snapshot";
}

std::vector<std::string> SplitKey(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view part = Trim(text.substr(start, comma - start));
    if (!part.empty()) {
      out.emplace_back(part);
    }
    start = comma + 1;
  }
  return out;
}

std::vector<std::string> ExtractPrimaryKey(const arrow::Schema& schema) {
  auto value = MetadataValue(schema, kPrimaryKeyMetadata);
  return value ? SplitKey(*value) : std::vector<std::string>{};
}

Result<TableMode> ExtractMode(const arrow::Schema& schema, TableMode fallback) {
  auto value = MetadataValue(schema, kModeMetadata);
  if (!value || Trim(*value).empty()) {
    return fallback;
  }
  return ParseTableMode(*value);
}

Result<std::shared_ptr<arrow::Schema>> WithTableMetadata(
    const std::shared_ptr<arrow::Schema>& schema, const std::vector<std::string>& primary_key,
    std::optional<TableMode> mode) {
  for (const auto& key : primary_key) {
    if (schema->GetFieldIndex(key) < 0) {
      return Status::Invalid("Primary key column '", key, "' is not in the schema ",
                             schema->ToString());
    }
  }
  auto md = schema->metadata() ? schema->metadata()->Copy()
                               : std::make_shared<arrow::KeyValueMetadata>();
  if (!primary_key.empty()) {
    std::string joined;
    for (const auto& key : primary_key) {
      if (!joined.empty()) joined += ",";
      joined += key;
    }
    RILL_RETURN_NOT_OK(md->Set(kPrimaryKeyMetadata, joined));
  }
  if (mode) {
    RILL_RETURN_NOT_OK(md->Set(kModeMetadata, TableModeName(*mode)));
  }
  return schema->WithMetadata(md);
}

bool IsSystemColumn(std::string_view name) {
  return name == kInsertTsColumn || name == kUpdateTsColumn;
}

std::shared_ptr<arrow::Schema> WithoutSystemColumns(const std::shared_ptr<arrow::Schema>& schema) {
  arrow::FieldVector fields;
  for (const auto& f : schema->fields()) {
    if (!IsSystemColumn(f->name())) fields.push_back(f);
  }
  if (static_cast<int>(fields.size()) == schema->num_fields()) {
    return schema;
  }
  return arrow::schema(std::move(fields), schema->metadata());
}

std::shared_ptr<arrow::Schema> WithSystemColumns(const std::shared_ptr<arrow::Schema>& schema) {
  auto base = WithoutSystemColumns(schema);
  arrow::FieldVector fields = base->fields();
  fields.push_back(arrow::field(kInsertTsColumn, arrow::float64(), /*nullable=*/false));
  fields.push_back(arrow::field(kUpdateTsColumn, arrow::float64(), /*nullable=*/false));
  return arrow::schema(std::move(fields), base->metadata());
}

namespace {

int64_t EstimateTypeBytes(const arrow::DataType& type, int64_t avg_string_bytes) {
  switch (type.id()) {
    case arrow::Type::STRING:
    case arrow::Type::BINARY:
      return 4 + avg_string_bytes;
    case arrow::Type::LARGE_STRING:
    case arrow::Type::LARGE_BINARY:
      return 8 + avg_string_bytes;
    case arrow::Type::STRING_VIEW:
    case arrow::Type::BINARY_VIEW:
      return 16 + avg_string_bytes;
    case arrow::Type::BOOL:
      return 1;
    case arrow::Type::DICTIONARY:
      return EstimateTypeBytes(*static_cast<const arrow::DictionaryType&>(type).index_type(),
                               avg_string_bytes);
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST:
      return 8 + 4 * EstimateTypeBytes(*type.field(0)->type(), avg_string_bytes);
    case arrow::Type::STRUCT: {
      int64_t total = 0;
      for (const auto& f : type.fields()) total += EstimateTypeBytes(*f->type(), avg_string_bytes);
      return total;
    }
    default: {
      int width = type.byte_width();
      return width > 0 ? width : 8;
    }
  }
}

}  // namespace

int64_t EstimateRowSize(const arrow::Schema& schema, int64_t avg_string_bytes) {
  int64_t total = 0;
  for (const auto& f : schema.fields()) {
    // One validity bit per column, rounded up to a byte per eight columns below.
    total += EstimateTypeBytes(*f->type(), avg_string_bytes);
  }
  total += (schema.num_fields() + 7) / 8;
  return std::max<int64_t>(total, 1);
}

int64_t EstimateRecordsCapacity(const arrow::Schema& schema, int64_t memory_bytes,
                                int64_t avg_string_bytes) {
  if (memory_bytes <= 0) return 0;
  return memory_bytes / EstimateRowSize(schema, avg_string_bytes);
}

bool SameColumnNamesAndTypes(const arrow::Schema& a, const arrow::Schema& b) {
  if (a.num_fields() != b.num_fields()) return false;
  for (int i = 0; i < a.num_fields(); ++i) {
    if (a.field(i)->name() != b.field(i)->name() ||
        !a.field(i)->type()->Equals(*b.field(i)->type())) {
      return false;
    }
  }
  return true;
}

}  // namespace rill
