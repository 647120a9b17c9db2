// The sqllogictest-style runner of tests/sql/*.test (format: tests/sql/README.md).
//
// A file is a list of records separated by blank lines. A record's first line
// is its directive; the lines after it are its body (SQL, a table definition,
// rows to push); a query's body ends its SQL with `----` and then lists the
// expected rows. Records run in order against one rill::Engine whose clock the
// file sets (`clock`), fed by one MemoryConnector per pushed table, ticked by
// `tick`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill::sqllogic {

/// One record of a .test file.
struct Record {
  int line = 0;                       ///< 1-based line of the directive
  std::vector<std::string> words;     ///< the directive line split on spaces
  std::string directive_line;         ///< the directive line as written
  std::vector<std::string> body;      ///< lines after the directive (before `----`)
  bool has_expected = false;          ///< a `----` line was present
  std::vector<std::string> expected;  ///< lines after `----`
};

/// Split `text` into records. Lines starting with `#` between records are
/// comments. Invalid (naming the line) for a record without a directive.
Result<std::vector<Record>> ParseRecords(const std::string& text);

/// Return the Arrow type a type name of a .test file stands for: the DuckDB
/// names (BOOLEAN, TINYINT … BIGINT, UTINYINT … UBIGINT, FLOAT/REAL, DOUBLE,
/// VARCHAR/TEXT, BLOB, DATE, TIMESTAMP, TIMESTAMP_S/_MS/_NS, TIMESTAMPTZ) plus
/// DICT (dictionary-encoded VARCHAR). Case-insensitive; Invalid otherwise.
Result<std::shared_ptr<arrow::DataType>> ParseTypeName(const std::string& name);

/// Return the rows of `table` as text, one string per cell: NULL for nulls,
/// (empty) for empty strings, true/false, numbers and times as Arrow prints them.
Result<std::vector<std::vector<std::string>>> FormatRows(const arrow::Table& table);

/// Run every record of `path`; return the first failure, naming file and line.
Status RunFile(const std::string& path);

}  // namespace rill::sqllogic
