// Breaks the rule: only the folders that link DuckDB include it.
#include <duckdb.hpp>
