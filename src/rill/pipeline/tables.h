// Declared tables: the one option table shared by `CREATE TABLE ... WITH (...)`
// and the pipeline file's `tables:` entries.
//
//   CREATE TABLE orders (order_id BIGINT NOT NULL, region TEXT, price DOUBLE,
//       ts TIMESTAMP, PRIMARY KEY (order_id))
//     WITH (mode = 'snapshot', max_rows = 1000000, max_age_seconds = 3600,
//           time_column = 'ts');
//
// Options: mode (snapshot | append), primary_key (names; also the PRIMARY KEY
// clause), max_rows, max_age_seconds, time_column (the retention's clock
// column; default z_insert_ts), or retention {max_rows, max_age_seconds,
// time_column} as the pipeline file nests them. An append table needs
// max_rows or max_age_seconds.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/pipeline/ddl.h"
#include "rill/pipeline/options.h"
#include "rill/table/live_table.h"

namespace rill::pipeline {

/// One declared table.
struct TableDecl {
  std::string name;
  std::shared_ptr<arrow::Schema> schema;  ///< the user columns
  TableOptions options;                   ///< key, mode, retention
  /// The columns as SQL writes them (for `rill pipeline dump --format sql`).
  std::vector<DdlColumn> columns;
  Options given;  ///< the WITH options as given
};

/// The option table of tables.
const OptionTable<TableDecl>& TableOptionTable();

/// Parse a column type as the pipeline file writes it: int8..int64,
/// uint8..uint64, float32 (float), float64 (double), bool, string (utf8),
/// large_string, binary, date32 (date), timestamp (microseconds) and
/// timestamp[UNIT] / timestamp[UNIT, TZ]. Invalid naming the text otherwise.
Result<std::shared_ptr<arrow::DataType>> ParseColumnType(std::string text);

/// The SQL type of an Arrow type as CREATE TABLE writes it (BIGINT, DOUBLE,
/// TEXT, TIMESTAMP, ...), for dumps of tables declared in YAML.
std::string SqlTypeOf(const arrow::DataType& type);

/// The pipeline file's name of an Arrow type (ParseColumnType reads it back).
std::string PipelineTypeName(const arrow::DataType& type);

/// Read a CREATE TABLE: `columns` and `primary_key` as the statement gave them,
/// `options` its WITH list. Errors carry SQLSTATEs: 42601 unknown/missing
/// option, 22023 a bad value, 42701 a duplicate column, 42703 an unknown key column.
Result<TableDecl> ReadTable(std::string name, const std::vector<DdlColumn>& columns,
                            std::vector<std::string> primary_key, const Options& options,
                            const std::string& where);

/// Read a table's options into `decl`, whose name and schema are set and whose
/// options.primary_key holds the key given outside the options (the PRIMARY
/// KEY clause), if any: checks the key's columns and an append table's
/// retention. The pipeline file's `tables:` entries come here with their
/// columns parsed. Errors as ReadTable's.
Status ReadTableOptions(const Options& options, const std::string& where, TableDecl* decl);

/// The options as Markdown (a heading and a table).
std::string TableOptionsMarkdown();

}  // namespace rill::pipeline
