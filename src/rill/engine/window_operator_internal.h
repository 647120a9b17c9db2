// The state of a WindowOperator (window_operator.h), shared by its two source
// files: window_operator.cc (consuming rows, closing windows) and
// window_output.cc (building output tables).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>
#include <boost/unordered/unordered_flat_map.hpp>

#include "rill/engine/window_aggregates_internal.h"
#include "rill/engine/window_operator.h"

namespace rill::window_internal {

/// One output aggregation and where its input comes from.
struct AggSlot {
  WindowAggregation agg;
  std::unique_ptr<AggState> state;       // null for kSql
  std::shared_ptr<arrow::DataType> input_type;  // null for count(*) and kSql
};

/// A reference to one row of a kept input batch (for kSql aggregations).
struct RowRef {
  uint32_t slot;
  uint32_t row;
};

struct BatchSlot {
  std::shared_ptr<arrow::RecordBatch> batch;
  int64_t refs = 0;
};

/// Hash of an encoded key: word-at-a-time, for the short keys of EncodeKey.
struct KeyHash {
  using is_avalanching = void;  // tells boost not to mix the result again
  size_t operator()(const std::string& s) const noexcept {
    uint64_t h = s.size() * 0x9E3779B97F4A7C15ULL;
    const char* p = s.data();
    size_t n = s.size();
    for (; n >= 8; p += 8, n -= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      h = Mix(h ^ w);
    }
    if (n > 0) {
      uint64_t w = 0;
      std::memcpy(&w, p, n);
      h = Mix(h ^ w ^ (uint64_t{n} << 56));
    }
    return h;
  }
  static uint64_t Mix(uint64_t x) {  // splitmix64 finalizer
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }
};

using GroupMap = boost::unordered_flat_map<std::string, uint32_t, KeyHash>;

/// An open tumbling or hopping window: its groups by encoded key.
struct Window {
  int64_t end = 0;
  GroupMap groups;
};

/// An open session of one key.
struct Session {
  int64_t start;
  int64_t last;  // latest event time; the session ends at last + gap
  uint32_t gid;
};

/// Entry of the session close queue: pushed once when a session opens, again
/// (with the new end) when it pops after the session grew; entries of freed
/// groups are skipped.
struct CloseEntry {
  int64_t end;
  uint32_t gid;
  bool operator>(const CloseEntry& o) const { return end > o.end; }
};

/// The input columns of the batch being consumed.
struct BatchInputs {
  std::vector<int64_t> times;               // event time, microseconds
  std::vector<uint8_t> time_valid;
  std::vector<InputColumn> keys;
  std::vector<std::unique_ptr<InputColumn>> aggs;  // null for count(*) and kSql
  int64_t seq0 = 0;
  int64_t slot = -1;                        // kept batch slot, -1 when not kept
};

}  // namespace rill::window_internal

namespace rill {

struct WindowOperator::Impl {
  using CloseQueue = std::priority_queue<window_internal::CloseEntry,
                                         std::vector<window_internal::CloseEntry>,
                                         std::greater<window_internal::CloseEntry>>;

  WindowSpec spec;
  SqlEngine* sql = nullptr;
  std::shared_ptr<arrow::Schema> input_schema;
  std::string time_column;  // resolved (z_update_ts for processing time)
  std::shared_ptr<arrow::DataType> time_type;      // input type of the time column
  std::shared_ptr<arrow::DataType> bound_type;     // window_start/end output type
  int64_t size_us = 0, slide_us = 0, gap_us = 0, lateness_us = 0, idle_us = 0;
  std::vector<window_internal::AggSlot> aggs;
  bool has_sql = false;
  std::vector<std::shared_ptr<arrow::DataType>> key_types;  // input types
  std::vector<window_internal::ValueKind> key_kinds;

  // Groups, by gid.
  std::vector<int64_t> g_start, g_end;
  std::vector<std::string> g_key;
  std::vector<std::vector<window_internal::RowRef>> g_refs;
  std::vector<uint8_t> g_dirty, g_alive;
  std::vector<uint32_t> free_gids;
  std::vector<uint32_t> dirty;
  int64_t live_groups = 0;
  int64_t key_bytes = 0;
  int64_t ref_count = 0;

  std::map<int64_t, window_internal::Window> windows;  // by start
  size_t expected_groups = 0;  // groups of the last closed window
  // Cleared maps of closed windows, reused by new ones: a steady stream then
  // never rehashes nor faults in fresh pages for its window maps.
  std::vector<window_internal::GroupMap> spare_maps;
  boost::unordered_flat_map<std::string, std::vector<window_internal::Session>,
                             window_internal::KeyHash>
      sessions;
  int64_t open_sessions = 0;
  CloseQueue close_queue;

  std::vector<window_internal::BatchSlot> slots;
  std::vector<uint32_t> free_slots;

  int64_t watermark_us = INT64_MIN;
  int64_t max_t_us = INT64_MIN;
  double last_arrival = 0;
  bool rows_since_emit = false;
  int64_t seq = 0;

  // Scratch for one Consume.
  window_internal::BatchInputs in;
  std::vector<uint32_t> pend_gids;
  std::vector<int64_t> pend_rows;
  std::string key_buf;

  mutable std::mutex stats_mu;
  WindowStats stats;  // guarded by stats_mu

  // window_operator.cc
  uint32_t NewGroup(int64_t start, int64_t end, const std::string& key);
  void FreeGroup(uint32_t gid);
  void Touch(uint32_t gid, int64_t row);
  void FlushPending();
  void AddToWindow(int64_t start, const std::string& key, int64_t row);
  void AddToSession(const std::string& key, int64_t t, int64_t row);
  void MergeGroups(uint32_t into, uint32_t from);
  void PublishStats();
  int64_t StateBytes() const;

  // window_output.cc
  /// Build the output rows of `gids`; the first `updates` are not final.
  Result<std::shared_ptr<arrow::Table>> Build(const std::vector<uint32_t>& gids,
                                              size_t updates);
  Result<std::vector<std::shared_ptr<arrow::Array>>> SqlColumns(
      const std::vector<uint32_t>& gids);
};

namespace window_internal {
/// Read `array` as event times in microseconds (see WindowSpec::time_column).
Status ReadTimes(const arrow::Array& array, std::vector<int64_t>* us,
                 std::vector<uint8_t>* valid);
/// Append the encoding of row `i` of `keys` to `out`.
void EncodeKey(const std::vector<InputColumn>& keys, int64_t i, std::string* out);
}  // namespace window_internal

}  // namespace rill
