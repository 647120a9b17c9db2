// PostgresSinkWriter: a table's changes into a PostgreSQL table (libpq).
//
// Each Write opens a transaction (when none is open), sends the changes with
// COPY ... (FORMAT binary) into a temporary staging table and applies them to
// the target in that transaction: upsert mode with DELETE ... USING (deletes)
// and INSERT ... SELECT ... ON CONFLICT (key) DO UPDATE (inserts and updates);
// changelog and append modes with a plain INSERT ... SELECT (changelog keeps the
// _op and _version columns). A snapshot ChangeSet first removes what the target
// held (upsert: the keys not in the snapshot; changelog and append: every row).
// When the target's column types are the staging types (a table the sink
// created), append and changelog batches, and upsert batches of inserts only
// (under a savepoint, falling back to staging when a key exists), COPY straight
// into the target. Commit stores the progress in rill_sink_progress(sink text
// primary key, version bigint, epoch bigint, updated_at timestamptz) and
// commits, so a batch is never half applied, and a crash before COMMIT leaves
// nothing.
//
// Errors: IOError naming the server (host:port of the DSN, never the password)
// when the connection fails or is lost (the Sink retries: Open again); Invalid
// with the server's message and SQLSTATE for a statement PostgreSQL refused;
// Invalid / KeyError at Open for a missing target without create_table, a
// target without a column of the table, or (upsert) without a unique key.
//
// Threads: a writer is used by one thread at a time (the sink's own).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "rill/common/status.h"
#include "rill/sink/sink.h"

namespace rill {

/// What a PostgresSinkWriter writes to, and how it connects.
struct PostgresSinkOptions {
  std::string dsn;           ///< a libpq connection string or URI
  std::string target_table;  ///< "name" or "schema.name"
  /// Create the target table from the Arrow schema when missing, with mapped
  /// types (postgres_sink_internal.h, docs/sinks.md) and, in upsert mode, the
  /// key as PRIMARY KEY. rill_sink_progress is created when missing either way.
  bool create_table = false;
  /// Name of this sink in rill_sink_progress (the SinkSet sets the sink's name).
  /// Empty: target_table.
  std::string sink_name;
  /// The mode the target is created for (changelog adds _op text and _version
  /// bigint; only upsert gets the key as PRIMARY KEY). nullopt: the target is
  /// created at the first Write, which knows the mode.
  std::optional<SinkMode> mode;
  /// libpq's connect_timeout (at least 2 s, libpq's own minimum).
  double connect_timeout_seconds = 10;
  /// statement_timeout of the session, and the TCP user timeout: a statement or
  /// a silent server fails after this long. 0: none.
  double statement_timeout_seconds = 60;
};

/// A writer for `options` (it connects in Open). Invalid (naming the option) for
/// an empty dsn or target_table or a timeout out of range. Any thread.
Result<std::unique_ptr<SinkWriter>> MakePostgresSinkWriter(PostgresSinkOptions options);

}  // namespace rill
