// Private to src/rill/sql: per-column bounds of Arrow data, from which the scan
// function gives DuckDB column statistics (ChunkCache keeps them per chunk).
//
// DuckDB's optimizer trusts statistics for rewrites that change results when
// the statistics are wrong (pruning filters, compressing group keys, choosing
// arithmetic without overflow checks), so a ColumnSummary must hold for every
// value. Summaries may be looser than the data: a chunk's summary covers all of
// its rows, dead ones included, which bounds any subset of them.
#pragma once

#include <cstdint>
#include <optional>

#include <arrow/type_fwd.h>

namespace rill::sql_internal {

/// Bounds of the values of one column over some rows. DuckDB-free; the scan
/// function turns it into DuckDB statistics.
struct ColumnSummary {
  enum class Kind : uint8_t {
    kSigned,    ///< int8..int64, date32, timestamp: min_signed / max_signed
    kUnsigned,  ///< uint8..uint64: min_unsigned / max_unsigned
    kFloat,     ///< float, double: min_float / max_float
    kString,    ///< utf8, large_utf8: prefixes, max_length, non_ascii
  };
  Kind kind = Kind::kSigned;
  /// Some row may be null.
  bool has_null = false;
  /// Some row may be non-null. When false, the bounds below mean nothing.
  bool has_valid = false;
  /// The min/max fields bound every non-null value. False when they cannot be
  /// expressed (a float column holding NaN or an infinity).
  bool has_bounds = false;
  int64_t min_signed = 0;
  int64_t max_signed = 0;
  uint64_t min_unsigned = 0;
  uint64_t max_unsigned = 0;
  double min_float = 0;
  double max_float = 0;
  /// Strings: the first 8 bytes, zero padded, read big-endian, so that integer
  /// order is DuckDB's byte order of the prefixes (its string statistics keep
  /// the same 8-byte prefixes).
  uint64_t min_prefix = 0;
  uint64_t max_prefix = 0;
  /// Strings: no value is longer than this many bytes.
  uint64_t max_length = 0;
  /// Strings: some value may contain a byte >= 0x80.
  bool non_ascii = false;
};

/// Return the summary of every row of `array`, or nullopt for types that are
/// not summarized (anything but integers, floats, date32, timestamps and
/// utf8 / large_utf8 strings). Cost: one pass over the array. Any thread.
std::optional<ColumnSummary> SummarizeArray(const arrow::Array& array);

/// Widen `into` so that it also bounds the rows `other` bounds. Both must be of
/// the same kind (summaries of one column).
void MergeSummary(ColumnSummary& into, const ColumnSummary& other);

}  // namespace rill::sql_internal
