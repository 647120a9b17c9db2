// Table schemas: primary key and mode carried in Arrow schema metadata, the
// system timestamp columns, and row-size estimates.
//
// Metadata keys (as the seed's `rills.schema()` writes them):
//   "primary_key": one column name, or several written "a,b"
//   "mode":        "snapshot" (alias "upsert") or "append"
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill {

/// How a table applies incoming rows.
enum class TableMode {
  kSnapshot,  ///< upsert by primary key (append when there is no key)
  kAppend,    ///< always append; a retention policy is mandatory
};

inline constexpr char kInsertTsColumn[] = "z_insert_ts";
inline constexpr char kUpdateTsColumn[] = "z_update_ts";
inline constexpr char kPrimaryKeyMetadata[] = "primary_key";
inline constexpr char kModeMetadata[] = "mode";

/// Parse "snapshot", "upsert" or "append" (case-insensitive).
Result<TableMode> ParseTableMode(std::string_view text);
/// Return "snapshot" or "append".
const char* TableModeName(TableMode mode);

/// Split "a,b" into {"a", "b"} (spaces trimmed, empty parts dropped).
std::vector<std::string> SplitKey(std::string_view text);

/// Return the primary-key columns recorded in `schema`'s metadata (empty if none).
std::vector<std::string> ExtractPrimaryKey(const arrow::Schema& schema);

/// Return the mode recorded in `schema`'s metadata, or `fallback` if none.
/// Invalid when the recorded mode is not a known mode.
Result<TableMode> ExtractMode(const arrow::Schema& schema,
                              TableMode fallback = TableMode::kSnapshot);

/// Return `schema` with primary_key / mode written into its metadata (other
/// metadata kept). Invalid when a key column is not a field of `schema`.
Result<std::shared_ptr<arrow::Schema>> WithTableMetadata(
    const std::shared_ptr<arrow::Schema>& schema, const std::vector<std::string>& primary_key,
    std::optional<TableMode> mode);

/// Return true if `name` is one of the two system timestamp columns.
bool IsSystemColumn(std::string_view name);

/// Return true if `a` and `b` have the same column names and types, in order
/// (nullability and metadata aside).
bool SameColumnNamesAndTypes(const arrow::Schema& a, const arrow::Schema& b);

/// Return `schema` without system columns, then with z_insert_ts and
/// z_update_ts (float64, not null) appended.
std::shared_ptr<arrow::Schema> WithSystemColumns(const std::shared_ptr<arrow::Schema>& schema);

/// Return `schema` without the system columns.
std::shared_ptr<arrow::Schema> WithoutSystemColumns(const std::shared_ptr<arrow::Schema>& schema);

/// Estimate the in-memory bytes of one row: fixed widths, validity bits, string
/// offsets plus `avg_string_bytes` of data for variable-width columns.
int64_t EstimateRowSize(const arrow::Schema& schema, int64_t avg_string_bytes = 32);

/// Return how many rows of `schema` fit in `memory_bytes` (at least 0).
int64_t EstimateRecordsCapacity(const arrow::Schema& schema, int64_t memory_bytes,
                                int64_t avg_string_bytes = 32);

}  // namespace rill
