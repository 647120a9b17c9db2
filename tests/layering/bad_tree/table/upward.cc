// Breaks the rule: table includes sql, a layer above it.
#include "rill/common/status.h"
#include "rill/sql/sql_engine.h"
