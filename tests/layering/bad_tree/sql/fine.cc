// Follows every rule: lower folders' public headers, its own internals, DuckDB in sql.
#include <duckdb.hpp>

#include "rill/common/status.h"
#include "rill/sql/arrow_scan_internal.h"
#include "rill/table/live_table.h"
