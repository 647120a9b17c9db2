// The state of a WindowOperator (window_operator.h), shared by its source
// files: window_operator.cc (consuming rows, closing windows),
// window_keys.cc (group keys as codes) and window_output.cc (output tables).
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

/// Hash of a key code (see KeyCodes). CodeMap places an entry by its high
/// bits, so rows visited in order of those bits probe a map's slots in order
/// (see WindowOperator::Impl::RadixOrder).
struct CodeHash {
  using is_avalanching = void;
  size_t operator()(uint64_t code) const noexcept { return KeyHash::Mix(code); }
};

/// A map from key code to V (default-constructible, trivially copyable):
/// open addressing with linear probing, the home slot of a code the high bits
/// of its CodeHash. So codes visited in order of those bits (RadixOrder) walk
/// the slots forward, and HomeAddress lets a caller prefetch a code's slot
/// ahead of its probe.
/// Entries are never erased one by one: Clear empties the map (keeping its
/// capacity), a rebuild drops what is not needed.
template <typename V, int kMaxLoadPercent = 75>
class CodeMap {
 public:
  struct Slot {
    uint64_t code;
    uint8_t used;
    V value;
  };
  CodeMap() { Rehash(16); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t bucket_count() const { return slots_.size(); }
  /// Make room for `n` entries without growing.
  void reserve(size_t n) {
    if (n * 100 > slots_.size() * kMaxLoadPercent) Rehash(n * 100 / kMaxLoadPercent + 1);
  }
  void clear() {
    if (size_ == 0) return;
    for (auto& slot : slots_) slot.used = 0;
    size_ = 0;
  }
  /// The address of `code`'s home slot, to prefetch.
  const char* HomeAddress(uint64_t code) const {
    return reinterpret_cast<const char*>(&slots_[Home(code)]);
  }
  /// The value of `code`, or null.
  V* Find(uint64_t code) {
    for (size_t i = Home(code);; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (!slot.used) return nullptr;
      if (slot.code == code) return &slot.value;
    }
  }
  /// The value of `code`, inserted as V() when absent; second: inserted.
  [[gnu::always_inline]] std::pair<V*, bool> TryEmplace(uint64_t code) {
    // Grow first when an insert would put the load above kMaxLoadPercent.
    if ((size_ + 1) * 100 > slots_.size() * kMaxLoadPercent) [[unlikely]] {
      Rehash(slots_.size() * 2);
    }
    for (size_t i = Home(code);; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.used) {
        if (slot.code == code) return {&slot.value, false};
        continue;
      }
      slot.code = code;
      slot.used = 1;
      slot.value = V();
      ++size_;
      return {&slot.value, true};
    }
  }
  template <typename F>
  void ForEach(F&& f) const {
    for (const auto& slot : slots_) {
      if (slot.used) f(slot.code, slot.value);
    }
  }

 private:
  size_t Home(uint64_t code) const { return CodeHash()(code) >> shift_; }
  [[gnu::noinline]] void Rehash(size_t min_slots) {
    size_t n = 16;
    int bits = 4;
    while (n < min_slots) {
      n *= 2;
      ++bits;
    }
    std::vector<Slot, HugePageAllocator<Slot>> old = std::move(slots_);
    slots_.assign(n, Slot{0, 0, V()});
    mask_ = n - 1;
    shift_ = 64 - bits;
    size_ = 0;
    for (const auto& slot : old) {
      if (slot.used) *TryEmplace(slot.code).first = slot.value;
    }
  }
  std::vector<Slot, HugePageAllocator<Slot>> slots_;
  size_t mask_ = 0;
  int shift_ = 60;
  size_t size_ = 0;
};

/// Groups of one window by key code (see KeyCodes).
/// At most half full: most rows of a sparse stream look for a key the map
/// does not hold yet, and linear probing's misses grow as 1 / (1 - load)^2.
using GroupMap = CodeMap<uint32_t, 50>;

constexpr uint32_t kNoGroup = UINT32_MAX;

/// A run of consecutive gids owned by one window: [first, first + used) are
/// its groups, in creation order; `size` is 16 << size class.
struct GidBlock {
  uint32_t first;
  uint32_t used;
  uint32_t size_class;
};
constexpr uint32_t kBlockClasses = 9;  // 16 to 4096 gids
constexpr uint32_t BlockSize(uint32_t size_class) { return 16u << size_class; }

/// An open tumbling or hopping window: its groups by key code (with
/// use_recent only those made while their RecentGroups slot was taken), the
/// group of the null key (single integer key only) and the gid blocks all its
/// groups live in. A window's groups are consecutive gids in a few blocks, so
/// closing it emits and frees them walking the state arrays in order, with
/// no sort and no walk of the map.
struct Window {
  int64_t end = 0;
  GroupMap groups;
  uint32_t null_gid = kNoGroup;
  std::vector<GidBlock> blocks;
  size_t num_groups = 0;
};

/// The groups of one key in its most recent windows, by window ordinal
/// (start / slide) modulo kRecent: one hash probe per row finds the groups of
/// every window the row falls in. A slot whose window is still open and is
/// not the one looked for is a conflict; that group goes to the window's map.
/// Slots of closed windows are stale (a closed window never takes rows again).
constexpr int kRecent = 8;
constexpr int64_t kNoOrdinal = INT64_MIN;
struct RecentGroups {
  int64_t ordinal[kRecent];
  uint32_t gid[kRecent];
  RecentGroups() {
    for (int i = 0; i < kRecent; ++i) ordinal[i] = kNoOrdinal;
  }
};

/// Turns a row's group key into a 64-bit code. With no key the code is 0;
/// with a single integer key it is the value itself (null flagged apart), so
/// no row builds a string; otherwise the row's encoded key (EncodeKey) is
/// interned once per row in a dictionary whose ids are the codes. Ids count
/// the live groups that use them; unused ids are swept in bulk once they
/// outnumber the used ones, so the dictionary stays bounded by the open state.
class KeyCodes {
 public:
  enum class Mode { kNone, kInt, kEncoded };
  void set_mode(Mode mode) { mode_ = mode; }
  Mode mode() const { return mode_; }
  /// Return the code of encoded key `key` (kEncoded), interning it.
  uint32_t Intern(const std::string& key);
  /// A group of `code` was created / freed (kEncoded; no-op otherwise).
  void Ref(uint64_t code) {
    if (mode_ == Mode::kEncoded && refs_[code]++ == 0) --dead_;
  }
  void Unref(uint64_t code) {
    if (mode_ == Mode::kEncoded && --refs_[code] == 0) ++dead_;
  }
  /// Drop unused ids when they outnumber the used ones.
  void MaybeSweep();
  /// The encoded key of id `code` (kEncoded).
  const std::string& key(uint64_t code) const { return keys_[code]; }
  int64_t bytes() const { return bytes_; }

 private:
  Mode mode_ = Mode::kNone;
  boost::unordered_flat_map<std::string, uint32_t, KeyHash> ids_;
  std::vector<std::string> keys_;
  std::vector<uint32_t> refs_;
  std::vector<uint32_t> free_ids_;
  int64_t dead_ = 0;
  int64_t bytes_ = 0;
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

// Hidden: its functions are librill's own, so calls among them are direct
// (and inlined) rather than through the PLT.
struct __attribute__((visibility("hidden"))) WindowOperator::Impl {
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
  double inv_slide = 1;  // 1 / slide_us
  // Numeric aggregations' state, one record per group (see NumericRecords);
  // their AggSlot states only build output.
  window_internal::NumericRecords records;
  std::vector<window_internal::AggSlot> aggs;
  bool has_sql = false;
  std::vector<std::shared_ptr<arrow::DataType>> key_types;  // input types
  std::vector<window_internal::ValueKind> key_kinds;

  // Groups, by gid.
  std::vector<int64_t> g_start, g_end;
  std::vector<uint64_t> g_code;   // key code (KeyCodes)
  std::vector<uint8_t> g_null;    // null single integer key
  std::vector<std::vector<window_internal::RowRef>> g_refs;  // sized only with has_sql
  std::vector<uint8_t> g_dirty, g_alive;
  std::vector<uint32_t> free_gids;
  std::vector<uint32_t> dirty;
  int64_t live_groups = 0;
  window_internal::KeyCodes codes;
  int64_t ref_count = 0;

  std::map<int64_t, window_internal::Window> windows;  // by start
  size_t expected_groups = 0;  // groups of the last closed window
  // Until a window closed: the on-time rows of the batch per window it spans,
  // to size the maps of its new windows (a fresh operator then does not
  // rehash them from 16 slots up).
  size_t batch_groups_hint = 0;
  // Free gid blocks of closed windows, by size class (their state slots reset).
  std::vector<uint32_t> free_blocks[window_internal::kBlockClasses];
  // Cleared maps of closed windows, reused by new ones: a steady stream then
  // never rehashes nor faults in fresh pages for its window maps.
  std::vector<window_internal::Window> spare_maps;
  size_t max_spares = 4;
  // Window lookups: the windows found lately, by ordinal (start / slide)
  // modulo kWindowCache, so rows visited out of time order (RadixOrder) find
  // theirs without a walk of `windows`. An entry is cleared when its window
  // is erased.
  static constexpr int kWindowCache = 64;
  int64_t cached_start[kWindowCache];
  window_internal::Window* cached_window[kWindowCache] = {};
  // Hopping with 3 to kRecent - 2 windows per row: recent
  // groups by key code (see RecentGroups); swept of keys whose windows all
  // closed once it outgrows the live groups.
  bool use_recent = false;
  window_internal::CodeMap<window_internal::RecentGroups> recent;
  boost::unordered_flat_map<uint64_t, std::vector<window_internal::Session>> sessions;
  std::vector<window_internal::Session> null_sessions;  // of the null integer key
  int64_t open_sessions = 0;
  CloseQueue close_queue;

  std::vector<window_internal::BatchSlot> slots;
  std::vector<uint32_t> free_slots;

  int64_t watermark_us = INT64_MIN;
  /// ConsumeRestored: rows are state moved from another instance, not arrivals.
  bool restoring = false;
  int64_t max_t_us = INT64_MIN;
  double last_arrival = 0;
  bool rows_since_emit = false;
  int64_t seq = 0;

  // Scratch for one Consume.
  window_internal::BatchInputs in;
  // Rows queued for their groups' aggregates: [0, pend_n) of each (sized
  // ahead by Consume, so Touch only stores).
  std::vector<uint32_t> pend_gids;
  std::vector<int64_t> pend_rows;
  size_t pend_n = 0;
  std::string key_buf;
  std::vector<uint8_t> row_late;  // 1: late or no event time (MarkLate)
  std::vector<uint64_t> row_codes;
  std::vector<uint8_t> row_nulls;
  std::vector<uint32_t> row_order;   // on-time rows in the order they are added
  std::vector<int64_t> row_ordinals; // of row_order's rows: Ordinal(event time)
  std::vector<uint32_t> radix_count;

  mutable std::mutex stats_mu;
  WindowStats stats;  // guarded by stats_mu

  // window_operator.cc
  /// Make room in the state arrays for gids below `n`.
  void GrowGroups(size_t n);
  /// Set up group `gid` (a free slot).
  void InitGroup(uint32_t gid, int64_t start, int64_t end, uint64_t code, bool null);
  /// A new group from the free list (sessions).
  uint32_t NewGroup(int64_t start, int64_t end, uint64_t code, bool null);
  /// A new group of window `w` (starting at `start`), from its last gid block.
  uint32_t NewWindowGroup(window_internal::Window& w, int64_t start, uint64_t code,
                          bool null);
  /// Give window `w` a new (empty) gid block.
  [[gnu::noinline]] void NewGidBlock(window_internal::Window& w);
  /// Drop `gid`'s row references (SQL aggregates), freeing batch slots no
  /// group refers to any more.
  void ReleaseRowRefs(uint32_t gid);
  void FreeGroup(uint32_t gid);
  /// Free every group of `blocks` and put the blocks on the free lists.
  void FreeBlocks(const std::vector<window_internal::GidBlock>& blocks);
  /// Append the gids of `blocks` to `gids`, in creation order.
  static void AppendGids(const std::vector<window_internal::GidBlock>& blocks,
                         std::vector<uint32_t>* gids);
  /// Fill row_order with the on-time rows (row_late 0) of the batch: in row
  /// order, or, for a large batch of keyed hopping windows (a row in several
  /// windows), by the high bits of their key's CodeHash (a stable counting
  /// sort, so the rows of one key keep their order and every aggregate sees
  /// them as before), so the RecentGroups and window map probes and the
  /// updates of groups made by earlier batches walk memory forward. Tumbling
  /// windows keep row order: with their probes prefetched (Consume) it
  /// measured faster than the reordered rows.
  void RadixOrder(int64_t n);
  void ClearWindowCache();
  /// Queue row `row` for group `gid`'s aggregates (FlushPending applies them).
  [[gnu::always_inline]] void Touch(uint32_t gid, int64_t row) {
    if (pend_n == pend_gids.size()) [[unlikely]] {
      pend_gids.resize(pend_n * 2 + 64);
      pend_rows.resize(pend_n * 2 + 64);
    }
    pend_gids[pend_n] = gid;
    pend_rows[pend_n] = row;
    ++pend_n;
    if (spec.emit == EmitMode::kOnUpdate && !g_dirty[gid]) {
      g_dirty[gid] = 1;
      dirty.push_back(gid);
    }
  }
  void FlushPending();
  /// Compute row_late of the batch in `in`.
  void MarkLate(int64_t n);
  /// Compute row_codes / row_nulls of the batch in `in`.
  void ComputeCodes(int64_t n);
  /// floor(t / slide_us), without a division for times of today.
  int64_t Ordinal(int64_t t) const;
  /// The window starting at `start` (= ordinal * slide_us), made when missing.
  window_internal::Window& FindWindow(int64_t start, int64_t ordinal);
  window_internal::Window& FindWindowSlow(int64_t start);
  /// The address of the map slot row `r` of the batch will probe first (to
  /// prefetch), or null.
  const char* ProbeAddress(uint32_t r) const;
  void AddToWindow(window_internal::Window& w, int64_t start, uint64_t code, bool null,
                   int64_t row);
  /// AddToWindow through `recent` (non-null keys with use_recent).
  void AddToRecent(window_internal::Window& w, int64_t start, int64_t ordinal,
                   window_internal::RecentGroups& rec, uint64_t code, int64_t row);
  void SweepRecent();
  std::vector<window_internal::Session>& SessionsOf(uint64_t code, bool null);
  void AddToSession(uint64_t code, bool null, int64_t t, int64_t row);
  void MergeGroups(uint32_t into, uint32_t from);
  void PublishStats();
  int64_t StateBytes() const;

  // window_output.cc
  /// Build the output rows of `gids`; the first `updates` are not final.
  Result<std::shared_ptr<arrow::Table>> Build(const std::vector<uint32_t>& gids,
                                              size_t updates);
  Status DecodeKeys(const std::vector<uint32_t>& gids,
                    std::vector<std::unique_ptr<arrow::ArrayBuilder>>* builders);
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
