// Catalog: SHOW and the graph of the dashboard's Pipeline view, both from
// one per-object status (what the object is doing and its counters).
#include <algorithm>
#include <set>

#include <arrow/builder.h>
#include <arrow/table.h>

#include "rill/common/json_text.h"
#include "rill/connector/connector.h"
#include "rill/metrics/metrics_store.h"
#include "rill/pipeline/catalog_internal.h"
#include "rill/sink/sink_set.h"

namespace rill::pipeline::catalog_internal {

namespace {

/// One object as SHOW lists it and the graph draws it.
struct ObjectStatus {
  DdlObject kind = DdlObject::kTable;
  std::string name;
  std::string options;
  std::string sql;
  std::string status = "running";
  std::string error;
  /// {"name": value, ...} (numbers), then the text ones (a view's maintenance).
  std::vector<std::pair<std::string, double>> counters;
  std::vector<std::pair<std::string, std::string>> text_counters;
  std::vector<std::string> reads;
  std::vector<std::string> writes;
};

std::string CountersJson(const ObjectStatus& o) {
  std::string out = "{";
  for (const auto& [name, value] : o.counters) {
    if (out.size() > 1) out += ",";
    AppendJsonString(&out, name);
    out += ":" + FormatNumber(value);
  }
  for (const auto& [name, value] : o.text_counters) {
    if (out.size() > 1) out += ",";
    AppendJsonString(&out, name);
    out += ":";
    AppendJsonString(&out, value);
  }
  return out + "}";
}

void TableCounters(Engine* engine, const std::string& table, ObjectStatus* o) {
  auto t = engine->GetTable(table);
  if (!t.ok()) {
    if (o->status == "running") o->status = "waiting";
    return;
  }
  auto snap = (*t)->snapshot();
  o->counters.emplace_back("rows", static_cast<double>(snap->num_rows()));
  o->counters.emplace_back("version", static_cast<double>(snap->version()));
  o->counters.emplace_back("updated_at", snap->published_at());
}

}  // namespace

namespace {

/// The status of every object of the catalog, then (for the kinds that
/// have them) the engine's objects made outside it.
std::vector<ObjectStatus> Collect(Engine* engine, MetricsStore* metrics,
                                  const std::vector<CatalogEntry>& entries,
                                  const std::map<std::string, SinkDecl>& pending,
                                  const std::map<std::string, std::string>& sink_errors) {
  std::vector<ObjectStatus> out;
  std::map<std::string, std::shared_ptr<Connector>> connectors;
  for (auto& c : engine->Connectors()) connectors[c->name()] = c;
  auto task_stats = engine->TaskStatistics();
  std::map<std::string, KpiSnapshot> kpis;
  std::map<std::string, AlertRuleInfo> rules;
  if (metrics != nullptr) {
    for (auto& k : metrics->LatestKpis()) kpis[k.query.name] = k;
    for (auto& r : metrics->AlertRules()) rules[r.rule.name] = r;
  }
  std::set<std::string> catalog_tables, catalog_sources;
  for (const CatalogEntry& e : entries) {
    ObjectStatus o;
    o.kind = e.kind;
    o.name = e.name;
    o.options = e.options;
    o.sql = e.sql;
    o.reads = e.reads;
    o.writes = e.writes;
    switch (e.kind) {
      case DdlObject::kTable:
        catalog_tables.insert(e.name);
        TableCounters(engine, e.name, &o);
        break;
      case DdlObject::kSource: {
        catalog_sources.insert(e.name);
        auto it = connectors.find(e.name);
        if (it == connectors.end()) {
          o.status = "stopped";
          break;
        }
        ConnectorStats s = it->second->stats();
        o.counters = {{"records", static_cast<double>(s.drained_records)},
                      {"received_bytes", static_cast<double>(s.received_bytes)},
                      {"buffered", static_cast<double>(s.buffered_records)},
                      {"rejected", static_cast<double>(s.rejected_records)},
                      {"dropped", static_cast<double>(s.dropped_records)},
                      {"errors", static_cast<double>(s.errors)},
                      {"lag", static_cast<double>(s.lag)}};
        if (s.errors > 0) o.status = "error";
        break;
      }
      case DdlObject::kMaterializedView:
      case DdlObject::kStreamView:
      case DdlObject::kWindow: {
        TableCounters(engine, e.writes.empty() ? e.name : e.writes.front(), &o);
        auto it = task_stats.find(e.name);
        if (it != task_stats.end()) {
          const TaskStats& t = it->second;
          o.counters.emplace_back("runs", static_cast<double>(t.runs));
          o.counters.emplace_back("errors", static_cast<double>(t.errors));
          o.counters.emplace_back("last_run_at", t.last_run_at);
          o.counters.emplace_back("last_duration_ms", t.last_duration_s * 1000);
          if (e.kind == DdlObject::kMaterializedView) {
            // How the view is kept up to date (engine/task.h TaskStats).
            o.counters.emplace_back("state_bytes", static_cast<double>(t.state_bytes));
            o.counters.emplace_back("changes_read", static_cast<double>(t.changes_read));
            o.counters.emplace_back("rows_upserted",
                                    static_cast<double>(t.rows_upserted));
            o.counters.emplace_back("rows_deleted", static_cast<double>(t.rows_deleted));
            o.text_counters.emplace_back("maintenance", t.maintenance);
          }
          if (!t.last_error.empty()) {
            o.status = "error";
            o.error = t.last_error;
          }
        }
        break;
      }
      case DdlObject::kSink: {
        if (pending.count(e.name) != 0) {
          o.status = "waiting";
          auto err = sink_errors.find(e.name);
          if (err != sink_errors.end()) {
            o.status = "error";
            o.error = err->second;
          }
          break;
        }
        auto sink = SinkSet::For(engine).Find(e.name);
        if (sink == nullptr) {
          o.status = "stopped";
          break;
        }
        SinkStats s = sink->stats();
        o.counters = {{"rows_written", static_cast<double>(s.rows_written)},
                      {"batches", static_cast<double>(s.batches)},
                      {"errors", static_cast<double>(s.errors)},
                      {"lag_versions", static_cast<double>(s.lag_versions)},
                      {"lag_seconds", s.lag_seconds}};
        if (!s.last_error.empty() && s.errors > 0) {
          o.status = "error";
          o.error = s.last_error;
        }
        break;
      }
      case DdlObject::kKpi: {
        auto it = kpis.find(e.name);
        if (it == kpis.end()) break;
        o.counters = {{"runs", static_cast<double>(it->second.runs)},
                      {"errors", static_cast<double>(it->second.errors)}};
        if (it->second.value) o.counters.emplace_back("value", *it->second.value);
        if (!it->second.last_error.empty()) {
          o.status = "error";
          o.error = it->second.last_error;
        }
        break;
      }
      case DdlObject::kAlertRule: {
        auto it = rules.find(e.name);
        if (it == rules.end()) break;
        o.counters = {{"fired", static_cast<double>(it->second.state.fire_count)}};
        if (it->second.state.last_value) {
          o.counters.emplace_back("last_value", *it->second.state.last_value);
        }
        if (!it->second.rule.enabled) o.status = "disabled";
        break;
      }
    }
    out.push_back(std::move(o));
  }
  // Tables and connectors made outside the catalog (Python, HTTP ingest).
  std::set<std::string> outputs;
  for (const CatalogEntry& e : entries) {
    if (e.kind != DdlObject::kSource) outputs.insert(e.writes.begin(), e.writes.end());
  }
  for (const std::string& name : engine->TableNames()) {
    if (outputs.count(name) != 0) continue;
    ObjectStatus o;
    o.name = name;
    o.writes = {name};
    TableCounters(engine, name, &o);
    out.push_back(std::move(o));
  }
  for (const auto& [name, c] : connectors) {
    if (catalog_sources.count(name) != 0) continue;
    ObjectStatus o;
    o.kind = DdlObject::kSource;
    o.name = name;
    o.writes = {c->target_table()};
    ConnectorStats s = c->stats();
    o.counters = {{"records", static_cast<double>(s.drained_records)},
                  {"errors", static_cast<double>(s.errors)}};
    out.push_back(std::move(o));
  }
  return out;
}

bool Listed(const DdlStatement& s, DdlObject kind) {
  if (s.show_all_views) {
    return kind == DdlObject::kMaterializedView || kind == DdlObject::kStreamView;
  }
  return kind == s.object;
}

}  // namespace

Result<DdlResult> CatalogImpl::ShowLocked(const DdlStatement& s) const {
  arrow::StringBuilder name, kind, options, status, counters;
  for (const ObjectStatus& o :
       Collect(engine_, metrics_, entries_, pending_sinks_, sink_errors_)) {
    if (!Listed(s, o.kind)) continue;
    RILL_RETURN_NOT_OK(name.Append(o.name));
    RILL_RETURN_NOT_OK(kind.Append(CatalogKindName(o.kind)));
    RILL_RETURN_NOT_OK(options.Append(o.options));
    RILL_RETURN_NOT_OK(status.Append(o.error.empty() ? o.status : o.status + ": " + o.error));
    RILL_RETURN_NOT_OK(counters.Append(CountersJson(o)));
  }
  arrow::ArrayVector columns(5);
  RILL_RETURN_NOT_OK(name.Finish(&columns[0]));
  RILL_RETURN_NOT_OK(kind.Finish(&columns[1]));
  RILL_RETURN_NOT_OK(options.Finish(&columns[2]));
  RILL_RETURN_NOT_OK(status.Finish(&columns[3]));
  RILL_RETURN_NOT_OK(counters.Finish(&columns[4]));
  auto schema = arrow::schema({arrow::field("name", arrow::utf8()),
                               arrow::field("kind", arrow::utf8()),
                               arrow::field("options", arrow::utf8()),
                               arrow::field("status", arrow::utf8()),
                               arrow::field("counters", arrow::utf8())});
  DdlResult result;
  result.tag = "SHOW";
  result.rows = arrow::Table::Make(schema, columns);
  return result;
}

std::string CatalogImpl::GraphJson() const {
  std::vector<ObjectStatus> objects;
  {
    std::lock_guard<std::mutex> lock(mu_);
    objects = Collect(engine_, metrics_, entries_, pending_sinks_, sink_errors_);
  }
  auto id = [](const ObjectStatus& o) { return std::string(CatalogKindName(o.kind)) + ":" + o.name; };
  // The object that writes each table (a source writes into a table it does
  // not own: the table's node is the writer's target, not the source).
  std::map<std::string, std::string> owner;
  for (const ObjectStatus& o : objects) {
    if (o.kind == DdlObject::kSource) continue;
    for (const std::string& t : o.writes) owner[t] = id(o);
  }
  std::string out = "{\"nodes\":[";
  bool first = true;
  for (const ObjectStatus& o : objects) {
    if (!first) out += ",";
    first = false;
    out += "{\"id\":";
    AppendJsonString(&out, id(o));
    out += ",\"kind\":";
    AppendJsonString(&out, CatalogKindName(o.kind));
    out += ",\"name\":";
    AppendJsonString(&out, o.name);
    out += ",\"ddl\":";
    AppendJsonString(&out, o.sql);
    out += ",\"options\":";
    AppendJsonString(&out, o.options);
    out += ",\"status\":";
    AppendJsonString(&out, o.status);
    out += ",\"error\":";
    AppendJsonString(&out, o.error);
    out += ",\"counters\":" + CountersJson(o) + "}";
  }
  out += "],\"edges\":[";
  first = true;
  auto edge = [&](const std::string& from, const std::string& to, const std::string& table) {
    if (!first) out += ",";
    first = false;
    out += "{\"from\":";
    AppendJsonString(&out, from);
    out += ",\"to\":";
    AppendJsonString(&out, to);
    out += ",\"table\":";
    AppendJsonString(&out, table);
    out += "}";
  };
  // An alert rule watching a KPI reads it.
  std::map<std::string, std::string> rule_metric;
  for (const CatalogEntry& e : Entries()) {
    if (e.kind != DdlObject::kAlertRule) continue;
    for (const auto& [name, value] : e.statement.with) {
      if (name == "metric") rule_metric[e.name] = value.text;
    }
  }
  for (const ObjectStatus& o : objects) {
    if (o.kind == DdlObject::kAlertRule) {
      auto m = rule_metric.find(o.name);
      for (const ObjectStatus& k : objects) {
        if (m != rule_metric.end() && k.kind == DdlObject::kKpi && k.name == m->second) {
          edge(id(k), id(o), "");
        }
      }
    }
    if (o.kind == DdlObject::kSource) {
      for (const std::string& t : o.writes) {
        auto it = owner.find(t);
        if (it != owner.end()) edge(id(o), it->second, t);
      }
    }
    for (const std::string& t : o.reads) {
      auto it = owner.find(t);
      if (it != owner.end()) edge(it->second, id(o), t);
    }
  }
  return out + "]}";
}

}  // namespace rill::pipeline::catalog_internal
