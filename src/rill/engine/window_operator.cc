// WindowOperator: assigning rows to windows, the watermark, closing windows.
// Output tables are built in window_output.cc.
#include "rill/engine/window_operator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <arrow/array.h>
#include <arrow/compute/cast.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>

#include "rill/engine/window_operator_internal.h"
#include "rill/table/schema.h"

namespace rill {

using window_internal::AggSlot;
using window_internal::CloseEntry;
using window_internal::InputColumn;
using window_internal::Session;
using window_internal::ValueKind;

namespace {

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t ToMicros(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1e6)); }

// ToMicros for |seconds| <= 9e12 (what ReadTimes accepts), without a libm
// call: rounds half away from zero like llround (x - trunc(x) is exact).
int64_t ToMicrosFast(double seconds) {
  const double x = seconds * 1e6;
  const int64_t r = static_cast<int64_t>(x);
  const double frac = x - static_cast<double>(r);
  return r + (frac >= 0.5 ? 1 : 0) - (frac <= -0.5 ? 1 : 0);
}

double ToSeconds(int64_t us) {
  if (us == INT64_MIN) return -std::numeric_limits<double>::infinity();
  if (us == INT64_MAX) return std::numeric_limits<double>::infinity();
  return static_cast<double>(us) / 1e6;
}

}  // namespace

namespace window_internal {

Status ReadTimes(const arrow::Array& array, std::vector<int64_t>* us,
                 std::vector<uint8_t>* valid) {
  const int64_t n = array.length();
  us->resize(n);
  valid->assign(n, 1);
  if (array.null_count() > 0) {
    for (int64_t i = 0; i < n; ++i) (*valid)[i] = array.IsValid(i) ? 1 : 0;
  }
  const auto& type = *array.type();
  auto raw64 = [&] { return array.data()->GetValues<int64_t>(1); };
  switch (type.id()) {
    case arrow::Type::TIMESTAMP: {
      const auto unit = static_cast<const arrow::TimestampType&>(type).unit();
      const int64_t* v = raw64();
      for (int64_t i = 0; i < n; ++i) {
        switch (unit) {
          case arrow::TimeUnit::SECOND: (*us)[i] = v[i] * 1000000; break;
          case arrow::TimeUnit::MILLI: (*us)[i] = v[i] * 1000; break;
          case arrow::TimeUnit::MICRO: (*us)[i] = v[i]; break;
          case arrow::TimeUnit::NANO: (*us)[i] = FloorDiv(v[i], 1000); break;
        }
      }
      return Status::OK();
    }
    case arrow::Type::DATE32: {
      const int32_t* v = array.data()->GetValues<int32_t>(1);
      for (int64_t i = 0; i < n; ++i) (*us)[i] = int64_t{v[i]} * 86400 * 1000000;
      return Status::OK();
    }
    case arrow::Type::DATE64: {
      const int64_t* v = raw64();
      for (int64_t i = 0; i < n; ++i) (*us)[i] = v[i] * 1000;
      return Status::OK();
    }
    case arrow::Type::FLOAT:
    case arrow::Type::DOUBLE:
    case arrow::Type::HALF_FLOAT: {
      std::shared_ptr<arrow::Array> cast;
      if (type.id() == arrow::Type::DOUBLE) {
        cast = arrow::MakeArray(array.data());
      } else {
        RILL_ASSIGN_OR_RAISE(auto d, arrow::compute::Cast(arrow::MakeArray(array.data()),
                                                          arrow::float64()));
        cast = d.make_array();
      }
      const double* v = static_cast<const arrow::DoubleArray&>(*cast).raw_values();
      int64_t* out = us->data();
      uint8_t* ok = valid->data();
      for (int64_t i = 0; i < n; ++i) {
        // Without branches: NaN fails the comparison too.
        const bool in_range = std::fabs(v[i]) <= 9e12;
        out[i] = ToMicrosFast(in_range ? v[i] : 0.0);
        ok[i] &= in_range ? 1 : 0;
      }
      return Status::OK();
    }
    default:
      break;
  }
  if (!arrow::is_integer(type.id())) {
    return Status::TypeError("time column of type ", type.ToString(),
                             " is no time: use unix seconds (a number), a timestamp or a date");
  }
  RILL_ASSIGN_OR_RAISE(auto d, arrow::compute::Cast(arrow::MakeArray(array.data()),
                                                    arrow::int64()));
  const int64_t* v = static_cast<const arrow::Int64Array&>(*d.make_array()).raw_values();
  for (int64_t i = 0; i < n; ++i) (*us)[i] = v[i] * 1000000;
  return Status::OK();
}

}  // namespace window_internal

const char* LateReasonName(LateReason reason) {
  return reason == LateReason::kNullTime ? "null event time" : "behind watermark";
}

// Make ---------------------------------------------------------------------------

WindowOperator::WindowOperator(std::unique_ptr<Impl> impl, WindowSpec spec)
    : impl_(std::move(impl)), spec_(std::move(spec)) {}

WindowOperator::~WindowOperator() = default;

Result<std::unique_ptr<WindowOperator>> WindowOperator::Make(
    WindowSpec spec, std::shared_ptr<arrow::Schema> input_schema, SqlEngine* sql) {
  RILL_RETURN_NOT_OK(spec.Validate());
  auto impl = std::make_unique<Impl>();
  impl->spec = spec;
  impl->sql = sql;
  impl->input_schema = input_schema;
  impl->time_column = spec.time_column.empty() ? kUpdateTsColumn : spec.time_column;
  auto field = input_schema->GetFieldByName(impl->time_column);
  if (!field) {
    return Status::KeyError("time column '", impl->time_column, "' not found in ",
                            input_schema->ToString());
  }
  impl->time_type = field->type();
  switch (field->type()->id()) {
    case arrow::Type::TIMESTAMP:
      impl->bound_type = arrow::timestamp(
          arrow::TimeUnit::MICRO,
          static_cast<const arrow::TimestampType&>(*field->type()).timezone());
      break;
    case arrow::Type::DATE32:
    case arrow::Type::DATE64:
      impl->bound_type = arrow::timestamp(arrow::TimeUnit::MICRO);
      break;
    default:
      if (!arrow::is_integer(field->type()->id()) && !arrow::is_floating(field->type()->id())) {
        return Status::TypeError("time column '", impl->time_column, "' of type ",
                                 field->type()->ToString(),
                                 " is no time: use unix seconds, a timestamp or a date");
      }
      impl->bound_type = arrow::float64();
  }
  impl->size_us = ToMicros(spec.size_seconds);
  impl->slide_us = spec.kind == WindowKind::kHopping && spec.slide_seconds > 0
                       ? ToMicros(spec.slide_seconds)
                       : impl->size_us;
  impl->gap_us = ToMicros(spec.gap_seconds);
  // One probe of a wide entry replaces one probe per window a row falls in:
  // worth it from three windows per row on (tumbling keeps the window maps).
  const int64_t per_row = (impl->size_us + impl->slide_us - 1) / impl->slide_us;
  impl->use_recent = spec.kind == WindowKind::kHopping && per_row >= 3 &&
                     per_row <= window_internal::kRecent - 2;
  if (spec.kind == WindowKind::kHopping) {
    impl->max_spares = static_cast<size_t>(
        std::clamp<int64_t>(impl->size_us / std::max<int64_t>(impl->slide_us, 1) + 2, 4, 64));
  }
  impl->inv_slide = 1.0 / static_cast<double>(std::max<int64_t>(impl->slide_us, 1));
  impl->lateness_us = ToMicros(spec.allowed_lateness_seconds);
  impl->idle_us = ToMicros(spec.idle_timeout_seconds);
  if (spec.kind != WindowKind::kSession && (impl->size_us <= 0 || impl->slide_us <= 0)) {
    return Status::Invalid("window size and slide must be at least one microsecond");
  }
  if (spec.kind == WindowKind::kSession && impl->gap_us <= 0) {
    return Status::Invalid("session gap must be at least one microsecond");
  }
  for (const auto& key : spec.group_by) {
    auto f = input_schema->GetFieldByName(key);
    if (!f) return Status::KeyError("group_by column '", key, "' not found");
    RILL_ASSIGN_OR_RAISE(auto kind, window_internal::KindOf(*f->type()));
    impl->key_types.push_back(f->type());
    impl->key_kinds.push_back(kind);
  }
  using Mode = window_internal::KeyCodes::Mode;
  impl->codes.set_mode(impl->key_kinds.empty() ? Mode::kNone
                       : impl->key_kinds.size() == 1 && impl->key_kinds[0] == ValueKind::kInt
                           ? Mode::kInt
                           : Mode::kEncoded);
  for (const auto& agg : spec.aggregations) {
    AggSlot slot{agg, nullptr, nullptr};
    if (agg.kind == WindowAggKind::kSql) {
      if (sql == nullptr) {
        return Status::Invalid("aggregation '", agg.output, "' = ", agg.expression,
                               " needs DuckDB, which this window has no access to");
      }
      impl->has_sql = true;
    } else if (agg.kind == WindowAggKind::kCountStar) {
      slot.state = impl->records.Add(agg.kind, ValueKind::kInt, /*input=*/-1);
    } else {
      auto f = input_schema->GetFieldByName(agg.column);
      if (!f) {
        return Status::KeyError("aggregation '", agg.output, "': column '", agg.column,
                                "' not found");
      }
      auto kind = window_internal::KindOf(*f->type());
      if (!kind.ok()) {
        return kind.status().WithMessage("aggregation '", agg.output, "': ",
                                         kind.status().message());
      }
      if (window_internal::NumericRecords::Fits(agg.kind, *kind)) {
        // Aggregations of one column share its input (and words of its record).
        int input = static_cast<int>(impl->aggs.size());
        for (size_t j = 0; j < impl->aggs.size(); ++j) {
          const auto& other = impl->aggs[j];
          if (other.state && other.agg.kind != WindowAggKind::kCountStar &&
              other.agg.column == agg.column) {
            input = static_cast<int>(j);
            break;
          }
        }
        slot.state = impl->records.Add(agg.kind, *kind, input);
        slot.input_type = f->type();
        impl->aggs.push_back(std::move(slot));
        continue;
      }
      auto state = window_internal::MakeAggState(agg.kind, *kind);
      if (!state.ok()) {
        return state.status().WithMessage("aggregation '", agg.output, "' over '", agg.column,
                                          "': ", state.status().message());
      }
      slot.state = std::move(state).ValueUnsafe();
      slot.input_type = f->type();
    }
    impl->aggs.push_back(std::move(slot));
  }
  std::unique_ptr<WindowOperator> op(new WindowOperator(std::move(impl), std::move(spec)));
  op->impl_->ClearWindowCache();
  RILL_ASSIGN_OR_RAISE(auto empty, op->impl_->Build({}, 0));
  op->output_schema_ = empty->schema();
  op->impl_->PublishStats();
  return op;
}

// Groups ---------------------------------------------------------------------------

void WindowOperator::Impl::GrowGroups(size_t n) {
  if (n <= g_alive.size()) return;
  const size_t cap = std::max<size_t>({1024, g_alive.size() * 2, n});
  g_start.reserve(cap);
  records.Grow(cap);
  for (auto& a : aggs) {
    if (a.state) a.state->Grow(cap);
  }
  g_end.resize(cap);
  g_code.resize(cap);
  g_null.resize(cap);
  if (has_sql) g_refs.resize(cap);  // row references only for DuckDB aggregations
  g_dirty.resize(cap, 0);
  g_alive.resize(cap, 0);
}

inline void WindowOperator::Impl::InitGroup(uint32_t gid, int64_t start, int64_t end, uint64_t code,
                                     bool null) {
  g_start[gid] = start;
  g_end[gid] = end;
  g_code[gid] = code;
  g_null[gid] = null ? 1 : 0;
  g_alive[gid] = 1;
  ++live_groups;
  codes.Ref(code);
}

uint32_t WindowOperator::Impl::NewGroup(int64_t start, int64_t end, uint64_t code,
                                       bool null) {
  uint32_t gid;
  if (!free_gids.empty()) {
    gid = free_gids.back();
    free_gids.pop_back();
  } else {
    gid = static_cast<uint32_t>(g_start.size());
    GrowGroups(gid + 1);
    g_start.push_back(0);
  }
  InitGroup(gid, start, end, code, null);
  return gid;
}

void WindowOperator::Impl::NewGidBlock(window_internal::Window& w) {
  using window_internal::BlockSize;
  // Blocks double in size up to the largest class, so a window's unused
  // slots stay below its groups plus 16.
  const uint32_t size_class = static_cast<uint32_t>(
      std::min<size_t>(w.blocks.size(), window_internal::kBlockClasses - 1));
  auto& free = free_blocks[size_class];
  uint32_t first;
  if (!free.empty()) {
    first = free.back();
    free.pop_back();
  } else {
    first = static_cast<uint32_t>(g_start.size());
    GrowGroups(first + BlockSize(size_class));
    g_start.resize(first + BlockSize(size_class));
  }
  w.blocks.push_back(window_internal::GidBlock{first, 0, size_class});
}

[[gnu::always_inline]] inline uint32_t WindowOperator::Impl::NewWindowGroup(
    window_internal::Window& w, int64_t start, uint64_t code, bool null) {
  using window_internal::BlockSize;
  if (w.blocks.empty() || w.blocks.back().used == BlockSize(w.blocks.back().size_class))
      [[unlikely]] {
    NewGidBlock(w);
  }
  auto& block = w.blocks.back();
  const uint32_t gid = block.first + block.used++;
  ++w.num_groups;
  InitGroup(gid, start, start + size_us, code, null);
  return gid;
}

void WindowOperator::Impl::ReleaseRowRefs(uint32_t gid) {
  for (const auto& ref : g_refs[gid]) {
    auto& slot = slots[ref.slot];
    if (--slot.refs == 0) {
      slot.batch.reset();
      free_slots.push_back(ref.slot);
    }
  }
  ref_count -= static_cast<int64_t>(g_refs[gid].size());
  std::vector<window_internal::RowRef>().swap(g_refs[gid]);
}

void WindowOperator::Impl::FreeGroup(uint32_t gid) {
  records.Reset(gid);
  for (auto& a : aggs) {
    if (a.state) a.state->Reset(gid);
  }
  if (has_sql) ReleaseRowRefs(gid);
  codes.Unref(g_code[gid]);
  g_alive[gid] = 0;
  g_dirty[gid] = 0;
  --live_groups;
  free_gids.push_back(gid);
}

void WindowOperator::Impl::FreeBlocks(const std::vector<window_internal::GidBlock>& blocks) {
  const bool encoded = codes.mode() == window_internal::KeyCodes::Mode::kEncoded;
  for (const auto& block : blocks) {
    const uint32_t first = block.first, end = block.first + block.used;
    records.ResetRange(first, block.used);
    for (auto& a : aggs) {
      if (a.state) a.state->ResetRange(first, block.used);
    }
    if (has_sql) {
      for (uint32_t gid = first; gid < end; ++gid) ReleaseRowRefs(gid);
    }
    if (encoded) {
      for (uint32_t gid = first; gid < end; ++gid) codes.Unref(g_code[gid]);
    }
    std::fill(g_alive.begin() + first, g_alive.begin() + end, 0);
    std::fill(g_dirty.begin() + first, g_dirty.begin() + end, 0);
    live_groups -= block.used;
    free_blocks[block.size_class].push_back(block.first);
  }
}

void WindowOperator::Impl::AppendGids(const std::vector<window_internal::GidBlock>& blocks,
                                      std::vector<uint32_t>* gids) {
  for (const auto& block : blocks) {
    for (uint32_t i = 0; i < block.used; ++i) gids->push_back(block.first + i);
  }
}


void WindowOperator::Impl::FlushPending() {
  const size_t n = pend_n;
  if (n == 0) return;
  for (size_t a = 0; a < aggs.size(); ++a) {
    if (!aggs[a].state) continue;
    aggs[a].state->Update(pend_gids.data(), pend_rows.data(), n, in.aggs[a].get(),
                          in.times.data(), in.seq0);
  }
  if (!records.empty()) records.Update(pend_gids.data(), pend_rows.data(), n, in.aggs);
  if (has_sql && in.slot >= 0) {
    for (size_t i = 0; i < n; ++i) {
      g_refs[pend_gids[i]].push_back(
          {static_cast<uint32_t>(in.slot), static_cast<uint32_t>(pend_rows[i])});
    }
    slots[in.slot].refs += static_cast<int64_t>(n);
    ref_count += static_cast<int64_t>(n);
  }
  pend_n = 0;
}

void WindowOperator::Impl::ClearWindowCache() {
  std::fill(std::begin(cached_start), std::end(cached_start), INT64_MIN);
  std::fill(std::begin(cached_window), std::end(cached_window), nullptr);
}

inline int64_t WindowOperator::Impl::Ordinal(int64_t t) const {
  // Below 2^52 the double quotient is off by at most one or two: correct it
  // instead of a 64-bit division per row.
  constexpr int64_t kExact = int64_t{1} << 52;
  if (t >= kExact || t <= -kExact) return FloorDiv(t, slide_us);
  int64_t q = static_cast<int64_t>(static_cast<double>(t) * inv_slide);  // truncated
  while (q * slide_us > t) --q;
  while (t - q * slide_us >= slide_us) ++q;
  return q;
}

inline window_internal::Window& WindowOperator::Impl::FindWindow(int64_t start,
                                                                 int64_t ordinal) {
  const int i = static_cast<int>(ordinal & (kWindowCache - 1));
  if (cached_start[i] == start) return *cached_window[i];
  return FindWindowSlow(start);
}

inline const char* WindowOperator::Impl::ProbeAddress(uint32_t r) const {
  const uint64_t code = row_codes[r];
  if (row_nulls[r]) return nullptr;
  if (use_recent) return recent.HomeAddress(code);
  // The map of the row's last window, when it is at hand.
  const int64_t ordinal = row_ordinals[r];
  const int i = static_cast<int>(ordinal & (kWindowCache - 1));
  if (cached_start[i] != ordinal * slide_us) return nullptr;
  return cached_window[i]->groups.HomeAddress(code);
}

window_internal::Window& WindowOperator::Impl::FindWindowSlow(int64_t start) {
  auto it = windows.find(start);
  if (it == windows.end()) {
    window_internal::Window fresh;
    fresh.end = start + size_us;
    it = windows.emplace(start, std::move(fresh)).first;
    if (!spare_maps.empty()) {
      it->second.groups = std::move(spare_maps.back().groups);
      it->second.blocks = std::move(spare_maps.back().blocks);
      spare_maps.pop_back();
    } else if (!use_recent) {
      // Windows of a steady stream hold about as many keys as the last closed one.
      it->second.groups.reserve(expected_groups > 0 ? expected_groups : batch_groups_hint);
    }
  }
  const int i = static_cast<int>((start / slide_us) & (kWindowCache - 1));
  cached_start[i] = start;
  cached_window[i] = &it->second;  // std::map nodes are stable until erased
  return it->second;
}

inline void WindowOperator::Impl::AddToRecent(window_internal::Window& w, int64_t start,
                                              int64_t ordinal,
                                              window_internal::RecentGroups& rec,
                                              uint64_t code, int64_t row) {
  const int slot = static_cast<int>(ordinal & (window_internal::kRecent - 1));
  if (rec.ordinal[slot] == ordinal) {
    Touch(rec.gid[slot], row);
    return;
  }
  const int64_t held = rec.ordinal[slot];
  const bool conflict =
      held != window_internal::kNoOrdinal && held * slide_us + size_us > watermark_us;
  // The window's map holds the groups made while their slot was taken.
  if (conflict || !w.groups.empty()) {
    if (const uint32_t* found = w.groups.Find(code)) {
      Touch(*found, row);
      return;
    }
  }
  const uint32_t gid = NewWindowGroup(w, start, code, false);
  if (conflict) {
    *w.groups.TryEmplace(code).first = gid;
  } else {
    rec.ordinal[slot] = ordinal;
    rec.gid[slot] = gid;
  }
  Touch(gid, row);
}

void WindowOperator::Impl::SweepRecent() {
  if (!use_recent || recent.size() <= 2 * static_cast<size_t>(live_groups) + 4096) return;
  decltype(recent) kept;
  kept.reserve(static_cast<size_t>(live_groups));
  recent.ForEach([&](uint64_t code, const window_internal::RecentGroups& rec) {
    for (int i = 0; i < window_internal::kRecent; ++i) {
      const int64_t o = rec.ordinal[i];
      if (o != window_internal::kNoOrdinal && o * slide_us + size_us > watermark_us) {
        *kept.TryEmplace(code).first = rec;
        break;
      }
    }
  });
  recent = std::move(kept);
}

inline void WindowOperator::Impl::AddToWindow(window_internal::Window& w, int64_t start,
                                       uint64_t code, bool null, int64_t row) {
  uint32_t gid;
  if (null) {
    if (w.null_gid == window_internal::kNoGroup) {
      w.null_gid = NewWindowGroup(w, start, code, true);
    }
    gid = w.null_gid;
  } else {
    auto [g, inserted] = w.groups.TryEmplace(code);
    if (inserted) *g = NewWindowGroup(w, start, code, false);
    gid = *g;
  }
  Touch(gid, row);
}

void WindowOperator::Impl::MergeGroups(uint32_t into, uint32_t from) {
  records.Merge(into, from);
  for (auto& a : aggs) {
    if (a.state) a.state->Merge(into, from);
  }
  if (has_sql) {
    auto& refs = g_refs[from];
    g_refs[into].insert(g_refs[into].end(), refs.begin(), refs.end());
    refs.clear();  // moved: FreeGroup must not release them
  }
  if (spec.emit == EmitMode::kOnUpdate && !g_dirty[into]) {
    g_dirty[into] = 1;
    dirty.push_back(into);
  }
  FreeGroup(from);
}

std::vector<Session>& WindowOperator::Impl::SessionsOf(uint64_t code, bool null) {
  return null ? null_sessions : sessions[code];
}

void WindowOperator::Impl::AddToSession(uint64_t code, bool null, int64_t t, int64_t row) {
  auto& list = SessionsOf(code, null);
  // Sessions of one key are disjoint and at least `gap` apart, so an event
  // overlaps (is within gap of) at most two of them, adjacent in start order.
  size_t first = list.size(), count = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    if (t < list[i].last + gap_us && list[i].start - gap_us < t) {
      if (count == 0) first = i;
      ++count;
    }
  }
  uint32_t gid;
  if (count == 0) {
    gid = NewGroup(t, t + gap_us, code, null);
    auto pos = std::lower_bound(list.begin(), list.end(), t,
                                [](const Session& s, int64_t v) { return s.start < v; });
    list.insert(pos, Session{t, t, gid});
    ++open_sessions;
    // One entry per session: when it pops after the session grew, it is pushed
    // again with the new end (see Emit), so extending a session costs nothing here.
    close_queue.push(CloseEntry{g_end[gid], gid});
  } else {
    Session& target = list[first];
    gid = target.gid;
    if (count > 1) {
      FlushPending();  // pending rows of the merged session must land first
      for (size_t j = first + count - 1; j > first; --j) {
        target.start = std::min(target.start, list[j].start);
        target.last = std::max(target.last, list[j].last);
        MergeGroups(gid, list[j].gid);
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(j));
        --open_sessions;
      }
    }
    Session& s = list[first];
    s.start = std::min(s.start, t);
    s.last = std::max(s.last, t);
    g_start[gid] = s.start;
    g_end[gid] = s.last + gap_us;
  }
  Touch(gid, row);
}

// Consume ------------------------------------------------------------------------

// Rows ahead whose map slot is prefetched (see ProbeAddress): about a memory
// latency's worth of rows.
constexpr size_t kPrefetchAhead = 8;

void WindowOperator::Impl::MarkLate(int64_t n) {
  row_late.resize(n);
  const bool by_window = spec.late_by_window && spec.kind != WindowKind::kSession;
  if (restoring) {
    // Moved state: each row goes to the windows of it that are still open
    // (sessions: to its session, open as long as the row was kept).
    for (int64_t r = 0; r < n; ++r) {
      const int64_t t = in.times[r];
      bool gone = !in.time_valid[r];
      if (!gone && spec.kind != WindowKind::kSession) {
        gone = FloorDiv(t, slide_us) * slide_us + size_us <= watermark_us;
      }
      row_late[r] = gone ? 1 : 0;
    }
    return;
  }
  for (int64_t r = 0; r < n; ++r) {
    const int64_t t = in.times[r];
    bool is_late = !in.time_valid[r] || t < watermark_us;
    if (is_late && by_window && in.time_valid[r]) {
      // Late only when its newest window (the last to close) has closed.
      is_late = FloorDiv(t, slide_us) * slide_us + size_us <= watermark_us;
    }
    row_late[r] = is_late ? 1 : 0;
  }
}

void WindowOperator::Impl::RadixOrder(int64_t n) {
  row_order.clear();
  // Below this many rows the maps' slots a batch probes are few anyway.
  constexpr int64_t kRadixMinRows = 1024;
  constexpr int kRadixBits = 8;
  // Only where a row falls in several windows: for tumbling windows the
  // prefetched probes in row order measured faster than the reordered rows.
  const bool radix = spec.kind == WindowKind::kHopping && size_us > slide_us &&
                     n >= kRadixMinRows &&
                     codes.mode() != window_internal::KeyCodes::Mode::kNone;
  if (!radix) {
    for (int64_t r = 0; r < n; ++r) {
      if (!row_late[r]) row_order.push_back(static_cast<uint32_t>(r));
    }
    return;
  }
  auto bucket = [&](int64_t r) {
    return static_cast<uint32_t>(window_internal::CodeHash()(row_codes[r]) >>
                                 (64 - kRadixBits));
  };
  radix_count.assign((size_t{1} << kRadixBits) + 1, 0);
  int64_t on_time = 0;
  for (int64_t r = 0; r < n; ++r) {
    if (row_late[r]) continue;
    ++radix_count[bucket(r) + 1];
    ++on_time;
  }
  for (size_t b = 1; b < radix_count.size(); ++b) radix_count[b] += radix_count[b - 1];
  row_order.resize(static_cast<size_t>(on_time));
  for (int64_t r = 0; r < n; ++r) {
    if (row_late[r]) continue;
    row_order[radix_count[bucket(r)]++] = static_cast<uint32_t>(r);
  }
}

std::vector<std::pair<double, double>> WindowOperator::OpenWindowsOf(double t) const {
  const Impl& s = *impl_;
  std::vector<std::pair<double, double>> out;
  if (s.spec.kind == WindowKind::kSession || !std::isfinite(t)) return out;
  const int64_t t_us = ToMicros(t);
  if (t_us < s.watermark_us && !s.spec.late_by_window) return out;
  for (int64_t start = FloorDiv(t_us, s.slide_us) * s.slide_us;
       start > t_us - s.size_us && start + s.size_us > s.watermark_us; start -= s.slide_us) {
    out.emplace_back(ToSeconds(start), ToSeconds(start + s.size_us));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

Status WindowOperator::Consume(const std::shared_ptr<arrow::RecordBatch>& batch, double now,
                               LateRows* late) {
  Impl& s = *impl_;
  const auto& spec = s.spec;
  const int64_t n = batch->num_rows();
  if (n == 0) return Status::OK();
  auto column = [&](const std::string& name) -> Result<std::shared_ptr<arrow::Array>> {
    auto c = batch->GetColumnByName(name);
    if (!c) return Status::KeyError("column '", name, "' not in the input batch");
    return c;
  };
  RILL_ASSIGN_OR_RAISE(auto time_array, column(s.time_column));
  RILL_RETURN_NOT_OK(window_internal::ReadTimes(*time_array, &s.in.times, &s.in.time_valid));
  s.in.keys.clear();
  for (const auto& key : spec.group_by) {
    RILL_ASSIGN_OR_RAISE(auto c, column(key));
    RILL_ASSIGN_OR_RAISE(auto input, window_internal::MakeInputColumn(c));
    s.in.keys.push_back(std::move(input));
  }
  s.in.aggs.clear();
  for (const auto& a : s.aggs) {
    if (!a.state || a.agg.kind == WindowAggKind::kCountStar) {
      s.in.aggs.emplace_back();
      continue;
    }
    RILL_ASSIGN_OR_RAISE(auto c, column(a.agg.column));
    RILL_ASSIGN_OR_RAISE(auto input, window_internal::MakeInputColumn(c));
    s.in.aggs.push_back(std::make_unique<InputColumn>(std::move(input)));
  }
  s.in.seq0 = s.seq;
  s.seq += n;
  s.in.slot = -1;
  if (s.has_sql) {
    uint32_t slot;
    if (!s.free_slots.empty()) {
      slot = s.free_slots.back();
      s.free_slots.pop_back();
    } else {
      slot = static_cast<uint32_t>(s.slots.size());
      s.slots.emplace_back();
    }
    s.slots[slot] = window_internal::BatchSlot{batch, 0};
    s.in.slot = slot;
  }

  if (late) late->watermark = ToSeconds(s.watermark_us);
  s.MarkLate(n);
  s.ComputeCodes(n);
  int64_t late_rows = 0, null_rows = 0, on_time = 0;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t t = s.in.times[r];
    if (s.row_late[r]) {
      const bool null_time = !s.in.time_valid[r];
      (null_time ? null_rows : late_rows)++;
      if (late) {
        late->rows.push_back(r);
        late->reasons.push_back(null_time ? LateReason::kNullTime
                                          : LateReason::kBehindWatermark);
        late->event_times.push_back(null_time ? std::nan("") : ToSeconds(t));
      }
      continue;
    }
    ++on_time;
    s.max_t_us = std::max(s.max_t_us, t);
  }
  s.RadixOrder(n);
  {
    // Room for every row in every window it can fall in (Touch only stores).
    const size_t per_row = spec.kind == WindowKind::kSession
                               ? 1
                               : static_cast<size_t>((s.size_us + s.slide_us - 1) / s.slide_us);
    const size_t need = s.row_order.size() * std::min<size_t>(per_row, 64);
    if (s.pend_gids.size() < need) {
      s.pend_gids.resize(need);
      s.pend_rows.resize(need);
    }
  }
  if (spec.kind != WindowKind::kSession) {
    // Each row's last window, once (the prefetch and the row both need it).
    s.row_ordinals.resize(static_cast<size_t>(n));
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const uint32_t r : s.row_order) {
      const int64_t o = s.Ordinal(s.in.times[r]);
      s.row_ordinals[r] = o;
      lo = std::min(lo, o);
      hi = std::max(hi, o);
    }
    s.batch_groups_hint =
        s.expected_groups > 0 || s.row_order.empty()
            ? 0
            : s.row_order.size() / static_cast<size_t>(std::min<int64_t>(hi - lo, 1 << 20) + 1);
  }
  switch (spec.kind) {
    case WindowKind::kTumbling:
    case WindowKind::kHopping:
      for (size_t k = 0; k < s.row_order.size(); ++k) {
        if (k + kPrefetchAhead < s.row_order.size()) {
          // In the loop itself: GCC drops calls of functions that only prefetch.
          if (const char* p = s.ProbeAddress(s.row_order[k + kPrefetchAhead])) {
            __builtin_prefetch(p);
            if (s.use_recent) {  // a RecentGroups slot spans two or three lines
              __builtin_prefetch(p + 64);
              __builtin_prefetch(p + sizeof(window_internal::CodeMap<
                                            window_internal::RecentGroups>::Slot) - 1);
            }
          }
        }
        const uint32_t r = s.row_order[k];
        const int64_t t = s.in.times[r];
        const uint64_t code = s.row_codes[r];
        const bool null = s.row_nulls[r] != 0;
        if (s.use_recent && !null) {
          auto& rec = *s.recent.TryEmplace(code).first;
          int64_t ordinal = s.row_ordinals[r];
          for (int64_t start = ordinal * s.slide_us;
               start > t - s.size_us && start + s.size_us > s.watermark_us;
               start -= s.slide_us, --ordinal) {
            s.AddToRecent(s.FindWindow(start, ordinal), start, ordinal, rec, code, r);
          }
          continue;
        }
        int64_t ordinal = s.row_ordinals[r];
        for (int64_t start = ordinal * s.slide_us;
             start > t - s.size_us && start + s.size_us > s.watermark_us;
             start -= s.slide_us, --ordinal) {
          s.AddToWindow(s.FindWindow(start, ordinal), start, code, null, r);
        }
      }
      break;
    case WindowKind::kSession:
      for (const uint32_t r : s.row_order) {
        s.AddToSession(s.row_codes[r], s.row_nulls[r] != 0, s.in.times[r], r);
      }
      break;
  }
  s.FlushPending();
  if (s.in.slot >= 0 && s.slots[s.in.slot].refs == 0) {
    s.slots[s.in.slot].batch.reset();
    s.free_slots.push_back(static_cast<uint32_t>(s.in.slot));
  }
  if (on_time > 0) {
    s.rows_since_emit = true;
    s.last_arrival = now;
  }
  {
    std::lock_guard<std::mutex> lock(s.stats_mu);
    s.stats.rows_in += n;
    s.stats.late_rows += late_rows;
    s.stats.null_time_rows += null_rows;
  }
  return Status::OK();
}

// Emit -----------------------------------------------------------------------------

Result<std::shared_ptr<arrow::Table>> WindowOperator::Emit(double now) {
  Impl& s = *impl_;
  if (s.max_t_us != INT64_MIN) {
    int64_t target = s.max_t_us - s.lateness_us;
    if (!s.rows_since_emit && s.idle_us > 0 && (now - s.last_arrival) * 1e6 >= s.idle_us) {
      // Idle source: let event time follow processing time.
      target += ToMicros(now - s.last_arrival);
    }
    s.watermark_us = std::max(s.watermark_us, target);
  }
  s.rows_since_emit = false;
  std::vector<uint32_t> closing;
  std::vector<window_internal::GidBlock> closing_blocks;
  if (s.spec.kind == WindowKind::kSession) {
    while (!s.close_queue.empty() && s.close_queue.top().end <= s.watermark_us) {
      const CloseEntry e = s.close_queue.top();
      s.close_queue.pop();
      if (!s.g_alive[e.gid]) continue;  // merged away or closed (or freed and reused)
      if (s.g_end[e.gid] > s.watermark_us) {
        s.close_queue.push(CloseEntry{s.g_end[e.gid], e.gid});  // it grew: requeue
        continue;
      }
      closing.push_back(e.gid);
    }
    std::sort(closing.begin(), closing.end());
    closing.erase(std::unique(closing.begin(), closing.end()), closing.end());
  } else {
    while (!s.windows.empty() && s.windows.begin()->second.end <= s.watermark_us) {
      auto& w = s.windows.begin()->second;
      // A window's groups are its gid blocks in creation order: emitting and
      // freeing them walks the state arrays in order, with no sort.
      Impl::AppendGids(w.blocks, &closing);
      closing_blocks.insert(closing_blocks.end(), w.blocks.begin(), w.blocks.end());
      s.expected_groups = w.num_groups;
      // Keep as many spare maps as windows a row falls in (hopping: size / slide).
      if (s.spare_maps.size() < s.max_spares) {
        w.groups.clear();
        w.blocks.clear();
        s.spare_maps.push_back(std::move(w));
      }
      s.windows.erase(s.windows.begin());
    }
    s.ClearWindowCache();
  }
  std::vector<uint32_t> rows;
  for (uint32_t gid : s.dirty) {
    if (s.g_dirty[gid] && s.g_end[gid] > s.watermark_us) rows.push_back(gid);
    s.g_dirty[gid] = 0;
  }
  s.dirty.clear();
  const size_t updates = rows.size();
  rows.insert(rows.end(), closing.begin(), closing.end());
  RILL_ASSIGN_OR_RAISE(auto out, s.Build(rows, updates));
  if (s.spec.kind == WindowKind::kSession) {
    for (uint32_t gid : closing) {
      auto& list = s.SessionsOf(s.g_code[gid], s.g_null[gid] != 0);
      list.erase(std::find_if(list.begin(), list.end(),
                              [&](const Session& x) { return x.gid == gid; }));
      if (list.empty() && !s.g_null[gid]) s.sessions.erase(s.g_code[gid]);
      --s.open_sessions;
      s.FreeGroup(gid);
    }
  } else {
    s.FreeBlocks(closing_blocks);
  }
  s.codes.MaybeSweep();
  s.SweepRecent();
  {
    std::lock_guard<std::mutex> lock(s.stats_mu);
    s.stats.groups_emitted += static_cast<int64_t>(closing.size());
    s.stats.updates_emitted += static_cast<int64_t>(updates);
  }
  s.PublishStats();
  return out;
}

Result<std::shared_ptr<arrow::Table>> WindowOperator::Flush() {
  Impl& s = *impl_;
  std::vector<uint32_t> all;
  for (uint32_t gid = 0; gid < s.g_start.size(); ++gid) {
    if (s.g_alive[gid]) all.push_back(gid);
  }
  std::sort(all.begin(), all.end(), [&](uint32_t a, uint32_t b) {
    return s.g_start[a] != s.g_start[b] ? s.g_start[a] < s.g_start[b] : a < b;
  });
  RILL_ASSIGN_OR_RAISE(auto out, s.Build(all, 0));
  if (s.spec.kind == WindowKind::kSession) {
    for (uint32_t gid : all) s.FreeGroup(gid);
  } else {
    for (const auto& [start, w] : s.windows) s.FreeBlocks(w.blocks);
  }
  s.codes.MaybeSweep();
  s.windows.clear();
  s.ClearWindowCache();
  s.sessions.clear();
  s.null_sessions.clear();
  s.recent.clear();
  s.open_sessions = 0;
  s.close_queue = Impl::CloseQueue();
  s.dirty.clear();
  {
    std::lock_guard<std::mutex> lock(s.stats_mu);
    s.stats.groups_emitted += static_cast<int64_t>(all.size());
  }
  s.PublishStats();
  return out;
}

Result<std::shared_ptr<arrow::Table>> WindowOperator::Peek() {
  Impl& s = *impl_;
  std::vector<uint32_t> all;
  for (uint32_t gid = 0; gid < s.g_start.size(); ++gid) {
    if (s.g_alive[gid]) all.push_back(gid);
  }
  std::sort(all.begin(), all.end(), [&](uint32_t a, uint32_t b) {
    return s.g_start[a] != s.g_start[b] ? s.g_start[a] < s.g_start[b] : a < b;
  });
  return s.Build(all, all.size());
}

Status WindowOperator::ConsumeRestored(const std::shared_ptr<arrow::RecordBatch>& batch,
                                       double now) {
  Impl& s = *impl_;
  const WindowStats before = stats();
  const bool rows_since_emit = s.rows_since_emit;
  const double last_arrival = s.last_arrival;
  s.restoring = true;
  Status st = Consume(batch, now, nullptr);
  s.restoring = false;
  s.rows_since_emit = rows_since_emit;
  s.last_arrival = last_arrival;
  // Not arrivals: the counters and the idle clock stay as they were.
  std::lock_guard<std::mutex> lock(s.stats_mu);
  s.stats.rows_in = before.rows_in;
  s.stats.late_rows = before.late_rows;
  s.stats.null_time_rows = before.null_time_rows;
  return st;
}

double WindowOperator::StateHorizon() const {
  const Impl& s = *impl_;
  if (s.watermark_us == INT64_MIN) return -INFINITY;
  if (s.spec.kind != WindowKind::kSession) {
    // The first window still open: the smallest start s with s + size > watermark.
    const int64_t first = (FloorDiv(s.watermark_us - s.size_us, s.slide_us) + 1) * s.slide_us;
    return ToSeconds(first);
  }
  int64_t oldest = INT64_MAX;
  for (const auto& [code, list] : s.sessions) {
    if (!list.empty()) oldest = std::min(oldest, list.front().start);
  }
  if (!s.null_sessions.empty()) oldest = std::min(oldest, s.null_sessions.front().start);
  // No open session: every row kept so far belongs to a closed one.
  return oldest == INT64_MAX ? ToSeconds(s.watermark_us) : ToSeconds(oldest);
}

void WindowOperator::AdvanceWatermark(double seconds) {
  if (!std::isfinite(seconds)) return;
  impl_->watermark_us = std::max(impl_->watermark_us, ToMicros(seconds));
}

double WindowOperator::watermark() const { return ToSeconds(impl_->watermark_us); }

WindowStats WindowOperator::stats() const {
  std::lock_guard<std::mutex> lock(impl_->stats_mu);
  return impl_->stats;
}

int64_t WindowOperator::Impl::StateBytes() const {
  int64_t per_group = 64 + records.slot_bytes();  // + start, end, key code, flags, refs, map entry
  int64_t variable = codes.bytes() + ref_count * static_cast<int64_t>(sizeof(window_internal::RowRef));
  for (const auto& a : aggs) {
    if (!a.state) continue;
    per_group += a.state->slot_bytes();
    variable += a.state->variable_bytes();
  }
  for (const auto& spare : spare_maps) {
    variable += static_cast<int64_t>(spare.groups.bucket_count() * (sizeof(uint64_t) + 5) +
                                     spare.blocks.capacity() * sizeof(window_internal::GidBlock));
  }
  variable += static_cast<int64_t>(recent.size() * (sizeof(window_internal::RecentGroups) + 9));
  return live_groups * per_group + variable +
         static_cast<int64_t>(windows.size() + sessions.size()) * 64;
}

void WindowOperator::Impl::PublishStats() {
  const int64_t open = spec.kind == WindowKind::kSession
                           ? open_sessions
                           : static_cast<int64_t>(windows.size());
  const int64_t bytes = StateBytes();
  std::lock_guard<std::mutex> lock(stats_mu);
  stats.windows_open = open;
  stats.groups_open = live_groups;
  stats.state_bytes = bytes;
  stats.watermark = ToSeconds(watermark_us);
  stats.max_event_time = ToSeconds(max_t_us);
}

}  // namespace rill
