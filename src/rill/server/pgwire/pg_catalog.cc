#include "rill/server/pgwire/pg_catalog.h"

namespace rill::pgwire {

std::vector<std::string> CatalogMacroSql() { return {}; }

std::string RewriteCatalogSql(std::string_view sql) { return std::string(sql); }

}  // namespace rill::pgwire
