// Parsing and formatting for the .test runner: records, type names, cells.
#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include <arrow/api.h>

#include "sqllogic.h"

namespace rill::sqllogic {

namespace {

std::vector<std::string> SplitWords(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  std::string w;
  while (in >> w) words.push_back(w);
  return words;
}

bool IsBlank(const std::string& line) {
  return std::all_of(line.begin(), line.end(), [](unsigned char c) { return std::isspace(c); });
}

std::string Upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Result<std::vector<Record>> ParseRecords(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  std::vector<Record> records;
  size_t i = 0;
  while (i < lines.size()) {
    if (IsBlank(lines[i]) || lines[i][0] == '#') {
      ++i;
      continue;
    }
    Record r;
    r.line = static_cast<int>(i) + 1;
    r.directive_line = lines[i];
    r.words = SplitWords(lines[i]);
    for (++i; i < lines.size() && !IsBlank(lines[i]); ++i) {
      if (!r.has_expected && lines[i] == "----") {
        r.has_expected = true;
      } else if (r.has_expected) {
        r.expected.push_back(lines[i]);
      } else {
        r.body.push_back(lines[i]);
      }
    }
    records.push_back(std::move(r));
  }
  return records;
}

Result<std::shared_ptr<arrow::DataType>> ParseTypeName(const std::string& name) {
  static const std::map<std::string, std::shared_ptr<arrow::DataType>> kTypes = {
      {"BOOLEAN", arrow::boolean()},
      {"BOOL", arrow::boolean()},
      {"TINYINT", arrow::int8()},
      {"SMALLINT", arrow::int16()},
      {"INTEGER", arrow::int32()},
      {"INT", arrow::int32()},
      {"BIGINT", arrow::int64()},
      {"UTINYINT", arrow::uint8()},
      {"USMALLINT", arrow::uint16()},
      {"UINTEGER", arrow::uint32()},
      {"UBIGINT", arrow::uint64()},
      {"FLOAT", arrow::float32()},
      {"REAL", arrow::float32()},
      {"DOUBLE", arrow::float64()},
      {"VARCHAR", arrow::utf8()},
      {"TEXT", arrow::utf8()},
      {"BLOB", arrow::binary()},
      {"DATE", arrow::date32()},
      {"TIMESTAMP", arrow::timestamp(arrow::TimeUnit::MICRO)},
      {"TIMESTAMP_S", arrow::timestamp(arrow::TimeUnit::SECOND)},
      {"TIMESTAMP_MS", arrow::timestamp(arrow::TimeUnit::MILLI)},
      {"TIMESTAMP_NS", arrow::timestamp(arrow::TimeUnit::NANO)},
      {"TIMESTAMPTZ", arrow::timestamp(arrow::TimeUnit::MICRO, "UTC")},
      {"DICT", arrow::dictionary(arrow::int32(), arrow::utf8())},
  };
  auto it = kTypes.find(Upper(name));
  if (it == kTypes.end()) {
    return Status::Invalid("unknown type name '", name, "'");
  }
  return it->second;
}

Result<std::vector<std::vector<std::string>>> FormatRows(const arrow::Table& table) {
  std::vector<std::vector<std::string>> rows(table.num_rows());
  for (int c = 0; c < table.num_columns(); ++c) {
    int64_t row = 0;
    for (const auto& chunk : table.column(c)->chunks()) {
      for (int64_t i = 0; i < chunk->length(); ++i, ++row) {
        RILL_ASSIGN_OR_RAISE(auto scalar, chunk->GetScalar(i));
        std::string cell;
        if (!scalar->is_valid) {
          cell = "NULL";
        } else if (scalar->type->id() == arrow::Type::BOOL) {
          cell = static_cast<const arrow::BooleanScalar&>(*scalar).value ? "true" : "false";
        } else if (scalar->type->id() == arrow::Type::DICTIONARY) {
          RILL_ASSIGN_OR_RAISE(auto decoded,
                               static_cast<const arrow::DictionaryScalar&>(*scalar).GetEncodedValue());
          cell = decoded->ToString();
        } else {
          cell = scalar->ToString();
        }
        if (cell.empty()) cell = "(empty)";
        rows[row].push_back(std::move(cell));
      }
    }
  }
  return rows;
}

}  // namespace rill::sqllogic
