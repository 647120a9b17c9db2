#include "rill/toolkit/queue_store.h"

#include <sqlite3.h>

#include <algorithm>

namespace rill::toolkit {

namespace {

/// Rolls back an open transaction unless committed.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {}
  ~Transaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void Done() { done_ = true; }

 private:
  sqlite3* db_;
  bool done_ = false;
};

}  // namespace

Result<std::unique_ptr<QueueStore>> QueueStore::Open(const std::string& path) {
  std::unique_ptr<QueueStore> store(new QueueStore(path));
  int rc = sqlite3_open_v2(path.c_str(), &store->db_,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  RILL_RETURN_NOT_OK(store->Check(rc, "open"));
  sqlite3_busy_timeout(store->db_, 5000);
  RILL_RETURN_NOT_OK(store->Exec("PRAGMA journal_mode=WAL"));
  RILL_RETURN_NOT_OK(store->Exec("PRAGMA synchronous=FULL"));
  RILL_RETURN_NOT_OK(store->Exec(
      "CREATE TABLE IF NOT EXISTS queue_messages (queue TEXT NOT NULL, id INTEGER NOT NULL, "
      "priority INTEGER NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, "
      "PRIMARY KEY (queue, id))"));
  RILL_RETURN_NOT_OK(store->Exec(
      "CREATE TABLE IF NOT EXISTS queues (name TEXT PRIMARY KEY, max_size INTEGER NOT NULL)"));
  RILL_RETURN_NOT_OK(store->Check(
      sqlite3_prepare_v2(store->db_, "INSERT INTO queue_messages VALUES (?, ?, ?, ?, ?)", -1,
                         &store->insert_, nullptr),
      "prepare insert"));
  RILL_RETURN_NOT_OK(store->Check(
      sqlite3_prepare_v2(store->db_, "DELETE FROM queue_messages WHERE queue = ? AND id = ?",
                         -1, &store->delete_, nullptr),
      "prepare delete"));
  RILL_RETURN_NOT_OK(store->Check(
      sqlite3_prepare_v2(store->db_,
                         "DELETE FROM queue_messages WHERE queue = ? AND id BETWEEN ? AND ?",
                         -1, &store->delete_range_, nullptr),
      "prepare delete range"));
  return store;
}

QueueStore::~QueueStore() {
  sqlite3_finalize(insert_);
  sqlite3_finalize(delete_);
  sqlite3_finalize(delete_range_);
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

Status QueueStore::Check(int rc, const char* what) {
  if (rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW) {
    return Status::OK();
  }
  const char* msg = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  return Status::IOError("queue store '", path_, "': ", what, ": ", msg);
}

Status QueueStore::Exec(const char* sql) {
  return Check(sqlite3_exec(db_, sql, nullptr, nullptr, nullptr), sql);
}

Status QueueStore::DeleteLocked(const std::string& queue, const std::vector<int64_t>& ids) {
  // A FIFO dequeue takes consecutive ids: delete each run with one statement.
  std::vector<int64_t> sorted(ids);
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i + 1;
    while (j < sorted.size() && sorted[j] == sorted[j - 1] + 1) ++j;
    sqlite3_stmt* stmt = j - i == 1 ? delete_ : delete_range_;
    sqlite3_reset(stmt);
    sqlite3_bind_text(stmt, 1, queue.data(), static_cast<int>(queue.size()), SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, sorted[i]);
    if (stmt == delete_range_) sqlite3_bind_int64(stmt, 3, sorted[j - 1]);
    RILL_RETURN_NOT_OK(Check(sqlite3_step(stmt), "delete"));
    i = j;
  }
  return Status::OK();
}

Status QueueStore::Save(const std::string& queue, const std::vector<StoredMessage>& added,
                        const std::vector<int64_t>& evicted) {
  std::lock_guard<std::mutex> lock(mu_);
  RILL_RETURN_NOT_OK(Exec("BEGIN IMMEDIATE"));
  Transaction tx(db_);
  for (const auto& m : added) {
    sqlite3_reset(insert_);
    sqlite3_bind_text(insert_, 1, queue.data(), static_cast<int>(queue.size()), SQLITE_STATIC);
    sqlite3_bind_int64(insert_, 2, m.id);
    sqlite3_bind_int64(insert_, 3, m.priority);
    sqlite3_bind_int64(insert_, 4, m.seq);
    sqlite3_bind_text(insert_, 5, m.body.data(), static_cast<int>(m.body.size()),
                      SQLITE_STATIC);
    RILL_RETURN_NOT_OK(Check(sqlite3_step(insert_), "insert"));
  }
  RILL_RETURN_NOT_OK(DeleteLocked(queue, evicted));
  RILL_RETURN_NOT_OK(Exec("COMMIT"));
  tx.Done();
  return Status::OK();
}

Status QueueStore::Delete(const std::string& queue, const std::vector<int64_t>& ids) {
  std::lock_guard<std::mutex> lock(mu_);
  RILL_RETURN_NOT_OK(Exec("BEGIN IMMEDIATE"));
  Transaction tx(db_);
  RILL_RETURN_NOT_OK(DeleteLocked(queue, ids));
  RILL_RETURN_NOT_OK(Exec("COMMIT"));
  tx.Done();
  return Status::OK();
}

Result<std::vector<StoredMessage>> QueueStore::Load(const std::string& queue) {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* stmt = nullptr;
  RILL_RETURN_NOT_OK(Check(
      sqlite3_prepare_v2(db_,
                         "SELECT id, priority, seq, body FROM queue_messages WHERE queue = ? "
                         "ORDER BY seq",
                         -1, &stmt, nullptr),
      "prepare load"));
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> guard(stmt, sqlite3_finalize);
  sqlite3_bind_text(stmt, 1, queue.data(), static_cast<int>(queue.size()), SQLITE_STATIC);
  std::vector<StoredMessage> out;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    StoredMessage m;
    m.id = sqlite3_column_int64(stmt, 0);
    m.priority = sqlite3_column_int64(stmt, 1);
    m.seq = sqlite3_column_int64(stmt, 2);
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 3));
    m.body.assign(text != nullptr ? text : "", sqlite3_column_bytes(stmt, 3));
    out.push_back(std::move(m));
  }
  RILL_RETURN_NOT_OK(Check(rc, "load"));
  return out;
}

Status QueueStore::Register(const std::string& queue, int64_t max_size) {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* stmt = nullptr;
  RILL_RETURN_NOT_OK(Check(
      sqlite3_prepare_v2(db_, "INSERT OR REPLACE INTO queues VALUES (?, ?)", -1, &stmt,
                         nullptr),
      "prepare register"));
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> guard(stmt, sqlite3_finalize);
  sqlite3_bind_text(stmt, 1, queue.data(), static_cast<int>(queue.size()), SQLITE_STATIC);
  sqlite3_bind_int64(stmt, 2, max_size);
  return Check(sqlite3_step(stmt), "register");
}

Status QueueStore::Unregister(const std::string& queue) {
  std::lock_guard<std::mutex> lock(mu_);
  RILL_RETURN_NOT_OK(Exec("BEGIN IMMEDIATE"));
  Transaction tx(db_);
  for (const char* sql : {"DELETE FROM queues WHERE name = ?",
                          "DELETE FROM queue_messages WHERE queue = ?"}) {
    sqlite3_stmt* stmt = nullptr;
    RILL_RETURN_NOT_OK(Check(sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr), sql));
    std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> guard(stmt, sqlite3_finalize);
    sqlite3_bind_text(stmt, 1, queue.data(), static_cast<int>(queue.size()), SQLITE_STATIC);
    RILL_RETURN_NOT_OK(Check(sqlite3_step(stmt), sql));
  }
  RILL_RETURN_NOT_OK(Exec("COMMIT"));
  tx.Done();
  return Status::OK();
}

Result<std::vector<std::pair<std::string, int64_t>>> QueueStore::Queues() {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* stmt = nullptr;
  RILL_RETURN_NOT_OK(Check(
      sqlite3_prepare_v2(db_, "SELECT name, max_size FROM queues ORDER BY name", -1, &stmt,
                         nullptr),
      "prepare queues"));
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> guard(stmt, sqlite3_finalize);
  std::vector<std::pair<std::string, int64_t>> out;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    out.emplace_back(std::string(text != nullptr ? text : ""), sqlite3_column_int64(stmt, 1));
  }
  RILL_RETURN_NOT_OK(Check(rc, "queues"));
  return out;
}

}  // namespace rill::toolkit
