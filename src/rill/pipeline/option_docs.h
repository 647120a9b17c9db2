// Markdown of an option table: the one source of docs/pipelines.md and
// docs/sql.md (`rill pipeline options`), so the docs cannot drift from what
// the parsers accept.
#pragma once

#include <string>

#include "rill/pipeline/options.h"

namespace rill::pipeline {

/// `heading` (a Markdown heading line, without the newline), then a table of
/// `table`'s options: name (required, alias), type and description.
template <typename Spec>
std::string OptionTableMarkdown(const OptionTable<Spec>& table, const std::string& heading) {
  std::string out = heading + "\n\n| option | type | description |\n|---|---|---|\n";
  for (const auto& d : table.defs) {
    std::string name = "`" + d.name + "`";
    if (d.required) name += " (required)";
    if (!d.alias.empty()) name += " (or `" + d.alias + "`)";
    std::string description;  // a | would end the Markdown cell
    for (char c : d.description) description += c == '|' ? std::string("\\|") : std::string(1, c);
    out += "| " + name + " | " + OptionTypeName(d.type) + " | " + description + " |\n";
  }
  if (!table.dotted_map.empty()) {
    out += "\nAny other option with a dot in its name (`bootstrap.servers`, `group.id`, ...) "
           "goes into `" + table.dotted_map + "`.\n";
  }
  return out + "\n";
}

}  // namespace rill::pipeline
