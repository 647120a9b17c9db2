// Engine: table creation, tables declared without a schema, and the task list.
//
// A declared table (DeclareTable) lives in `declared_` until the first batch
// written to it gives it a schema; CreateTable then makes the LiveTable with
// the declared options, hands it the subscribers that waited for it and moves
// it to `tables_`, all under `mu_`, so no reader sees the name in both maps or
// in neither.
#include <algorithm>
#include <cctype>
#include <utility>

#include <arrow/type.h>

#include "rill/common/logging.h"
#include "rill/engine/engine.h"
#include "rill/sql/sql_engine.h"

namespace rill {

namespace {

bool IsReserved(const std::string& name) { return name.rfind("rill_", 0) == 0; }

Status ReservedName(const std::string& name) {
  return Status::Invalid("Table name '", name, "' is reserved: names starting with 'rill_' ",
                         "belong to the engine");
}

Status Taken(const std::string& name) {
  return Status::Invalid("Table '", name, "' is already registered");
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

Result<std::shared_ptr<LiveTable>> Engine::CreateTable(const std::string& name,
                                                       std::shared_ptr<arrow::Schema> schema,
                                                       TableOptions options,
                                                       bool from_declaration) {
  if (IsReserved(name)) {
    return ReservedName(name);
  }
  if (from_declaration) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = declared_.find(name);
    if (it != declared_.end()) {
      options = it->second.options;
    }
  }
  if (!options.clock) {
    options.clock = clock_;
  }
  if (options.auto_compact_chunks == TableOptions{}.auto_compact_chunks) {
    options.auto_compact_chunks = options_.auto_compact_chunks;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tables_.count(name) || (!from_declaration && declared_.count(name))) {
      return Taken(name);
    }
  }
  RILL_ASSIGN_OR_RAISE(auto table, LiveTable::Make(name, std::move(schema), std::move(options)));
  table->SetErrorHandler([this](const std::string& t, const std::string& what) {
    RecordEvent(EngineEvent::Engine(Severity::kError, "subscriber:" + t,
                                    "Subscriber of table '" + t + "' failed", what));
  });
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tables_.count(name) || (!from_declaration && declared_.count(name))) {
      return Taken(name);
    }
    auto it = declared_.find(name);
    if (it != declared_.end()) {
      // The subscribers that waited see the first version, under their old ids.
      for (auto& [pending_id, callback] : it->second.subscribers) {
        subscription_aliases_[{name, pending_id}] = table->Subscribe(std::move(callback));
      }
      declared_.erase(it);
    }
    tables_[name] = table;
  }
  RILL_RETURN_NOT_OK(sql_->RegisterTable(table));
  return table;
}

Status Engine::DeclareTable(const std::string& name, TableOptions options) {
  if (name.empty()) {
    return Status::Invalid("A table needs a name");
  }
  if (IsReserved(name)) {
    return ReservedName(name);
  }
  if (options.retention) {
    RILL_RETURN_NOT_OK(options.retention->Validate());
  }
  RILL_RETURN_NOT_OK(
      CheckAppendRetention(name, options.mode.value_or(TableMode::kSnapshot), options.retention));
  std::lock_guard<std::mutex> lock(mu_);
  if (tables_.count(name) || declared_.count(name)) {
    return Taken(name);
  }
  declared_[name].options = std::move(options);
  return Status::OK();
}

std::optional<TableOptions> Engine::TableDeclaration(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = declared_.find(name);
  if (it == declared_.end()) {
    return std::nullopt;
  }
  return it->second.options;
}

std::vector<std::string> Engine::DeclaredTableNames() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, declaration] : declared_) {
    names.push_back(name);
  }
  return names;
}

Result<std::shared_ptr<LiveTable>> Engine::TableForWrite(const std::string& name,
                                                         std::shared_ptr<arrow::Schema> schema) {
  if (auto t = FindTable(name)) {
    return t;
  }
  if (!TableDeclaration(name)) {
    if (auto t = FindTable(name)) {  // the loop made it from the declaration meanwhile
      return t;
    }
    return Status::KeyError("Unknown table '", name, "'");
  }
  auto created = CreateTable(name, std::move(schema), {}, /*from_declaration=*/true);
  if (!created.ok()) {
    if (auto t = FindTable(name)) {  // another writer created it first
      return t;
    }
  }
  return created;
}

std::vector<std::shared_ptr<Task>> Engine::Tasks() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Task>> out;
  for (const auto& [name, task] : tasks_) {
    out.push_back(task);
  }
  return out;
}

Result<LiveTable::SubscriptionId> Engine::SubscribeDeclared(const std::string& table,
                                                            LiveTable::Subscriber callback) {
  std::shared_ptr<LiveTable> created;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = declared_.find(table);
    if (it != declared_.end()) {
      LiveTable::SubscriptionId id = next_declared_subscription_++;
      it->second.subscribers.emplace(id, std::move(callback));
      return id;
    }
    auto t = tables_.find(table);
    if (t == tables_.end()) {
      return Status::KeyError("Unknown table '", table, "'");
    }
    created = t->second;  // created since the caller looked
  }
  return created->Subscribe(std::move(callback));
}

LiveTable::SubscriptionId Engine::ResolveSubscription(const std::string& table,
                                                      LiveTable::SubscriptionId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto declared = declared_.find(table);
  if (declared != declared_.end() && declared->second.subscribers.erase(id)) {
    return 0;
  }
  auto alias = subscription_aliases_.find({table, id});
  if (alias == subscription_aliases_.end()) {
    return id;
  }
  LiveTable::SubscriptionId own = alias->second;
  subscription_aliases_.erase(alias);
  return own;
}

Status Engine::ExplainDeclaredTables(const Status& status) const {
  const std::string message = Lower(status.message());
  std::vector<std::string> missing;
  for (const auto& name : DeclaredTableNames()) {
    if (message.find("name " + Lower(name) + " does not exist") != std::string::npos) {
      missing.push_back(name);
    }
  }
  if (missing.empty()) {
    return status;
  }
  std::string names;
  for (const auto& n : missing) {
    names += (names.empty() ? "'" : ", '") + n + "'";
  }
  return status.WithMessage(status.message(), "\n(", names,
                            missing.size() == 1 ? " is" : " are",
                            " registered without a schema and has no rows yet: SQL sees a "
                            "declared table from its first batch on)");
}

}  // namespace rill
