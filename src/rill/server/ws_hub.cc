#include "rill/server/ws_hub.h"

#include "rill/server/auth.h"

#include <atomic>
#include <deque>
#include <set>
#include <shared_mutex>
#include <sstream>

#include <arrow/type.h>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket.hpp>

#include "rill/engine/engine.h"
#include "rill/metrics/metrics_store.h"
#include "rill/pipeline/catalog.h"
#include "rill/server/ingest.h"  // the `ingest` message
#include "rill/server/json_body.h"
#include "rill/server/json_writer.h"
#include "rill/server/server_impl.h"
#include "rill/server/ws_table_changes.h"
#include "rill/table/change_feed.h"

namespace rill::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
namespace json = boost::json;

namespace {

std::chrono::steady_clock::duration Seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

std::string EventFrame(std::string_view channel, std::string_view data) {
  return WsEventFrame(channel, data);
}

// Bounds of the table channels: change rows per event frame, unsent rows a
// client may have pending (merged by key) before it gets a snapshot instead,
// rows of a snapshot frame, rows per read of the hub's change feed.
constexpr int64_t kTableFrameRows = 500;
constexpr int64_t kTablePendingRows = 10000;
constexpr int64_t kTableSnapshotRows = 1000;
constexpr int64_t kTableReadRows = 10000;

/// The pipeline channel's period: the graph's counters once a second.
constexpr double kPipelineIntervalSeconds = 1.0;

bool Coalescible(const std::string& channel) {
  return channel != "alerts" && channel.rfind("table:", 0) != 0;
}

}  // namespace

// Session ----------------------------------------------------------------------------

class WsSession : public Closable, public std::enable_shared_from_this<WsSession> {
 public:
  WsSession(std::shared_ptr<WsHub::State> hub, beast::tcp_stream stream,
            std::shared_ptr<void> slot);
  ~WsSession() override;

  void Run(beast::flat_buffer buffer, http::request<http::string_body> request);
  /// Queue `frame` if the client subscribed to `channel`. Any thread.
  void Post(std::string channel, std::shared_ptr<const std::string> frame) {
    net::post(ws_.get_executor(), [self = shared_from_this(), channel = std::move(channel),
                                   frame = std::move(frame)]() mutable {
      if (self->channels_.count(channel) > 0) {
        self->Enqueue(std::move(channel), std::move(frame));
      }
    });
  }
  /// Merge `changes` of table channel `channel` into this client's pending
  /// changes, if it subscribed to it. Any thread.
  void PostChanges(std::string channel, std::shared_ptr<const WsTableChanges> changes) {
    net::post(ws_.get_executor(), [self = shared_from_this(), channel = std::move(channel),
                                   changes = std::move(changes)]() mutable {
      self->OnChanges(channel, *changes);
    });
  }
  void Close() override {
    net::post(ws_.get_executor(), [self = shared_from_this()] {
      if (self->closing_) return;
      self->closing_ = true;
      self->ws_.async_close(websocket::close_code::going_away,
                            [self](beast::error_code) {});
    });
  }

 private:
  void Read();
  void OnMessage();
  /// Run an `ingest` message on a worker and reply with its ack (ingest.h).
  void IngestOnWorker(json::object message);
  void Reply(std::string text) {
    Enqueue("", std::make_shared<const std::string>(std::move(text)));
  }
  /// Queue the pipeline graph now (computed on a worker), on subscribing.
  void SendPipelineNow();
  /// `keep`: never coalesced or dropped (table snapshots and change markers).
  void Enqueue(std::string channel, std::shared_ptr<const std::string> frame, bool keep = false);
  void WriteNext();
  // Table channels (io strand): each subscribed table has pending changes; a
  // marker frame (no text) in the queue stands for them and is formatted when
  // it is written, so changes that arrive meanwhile merge into it by key.
  void OnChanges(const std::string& channel, const WsTableChanges& changes);
  /// The reply of a subscribe message, sent once the snapshots it asked for are queued.
  struct PendingReply {
    int waiting = 0;
    std::string text;
  };
  void RequestSnapshot(const std::string& channel,
                       std::shared_ptr<PendingReply> reply = nullptr);
  void OnSnapshot(const std::string& channel, std::shared_ptr<const std::string> frame,
                  uint64_t version, const std::shared_ptr<PendingReply>& reply);
  void QueueMarker(const std::string& channel);

  struct Frame {
    std::string channel;
    std::shared_ptr<const std::string> text;  // null: a table channel's marker
    bool keep = false;
  };
  struct TableState {
    WsPendingChanges pending;
    bool queued = false;      // a marker is in queue_ (not yet being written)
    bool awaiting = false;    // a snapshot was requested and has not come yet
    bool resnapshot = false;  // fell behind again while awaiting: one more
    // While awaiting: the newest version whose changes were dropped. A
    // snapshot taken at or after it covers them, so it needs no other one
    // (otherwise, with many clients, each snapshot waits behind the others'
    // long enough to fall behind again, and they snapshot for ever).
    uint64_t dropped_to = 0;
  };

  std::shared_ptr<WsHub::State> hub_;
  websocket::stream<beast::tcp_stream> ws_;
  std::shared_ptr<void> slot_;
  beast::flat_buffer read_buffer_;
  std::set<std::string> channels_;
  std::map<std::string, TableState> tables_;  // by channel ("table:<name>")
  std::deque<Frame> queue_;
  bool writing_ = false;
  bool closing_ = false;
  int64_t dropped_ = 0;        // since the last notice
  int64_t coalesced_ = 0;      // since the last notice
  bool notice_pending_ = false;
  uint64_t id_ = 0;
};

struct WsHub::State : std::enable_shared_from_this<WsHub::State> {
  explicit State(Server::Impl& s) : server(s), ctx(*s.ctx) {}

  Server::Impl& server;
  ServerContext& ctx;
  std::mutex mu;
  // Broadcasts hold it shared for their whole run; Stop takes it exclusively
  // to set `stopped`, so once Stop returns no broadcast is posting to the
  // io_context (which the server destroys next).
  std::shared_mutex flight_mu;
  bool stopped = false;  // guarded by flight_mu
  std::map<uint64_t, std::weak_ptr<WsSession>> sessions;  // guarded by mu
  uint64_t next_id = 1;
  std::map<std::string, LiveTable::SubscriptionId> table_subs;  // guarded by mu
  /// A subscribed table: one change feed, read on a worker after each new
  /// version, its rows formatted once and merged into each client's pending changes.
  struct TableChannel {
    std::string table;
    std::string channel;
    std::mutex mu;
    std::shared_ptr<ChangeFeed> feed;   // guarded by mu; opened once the table exists
    std::vector<int> key_columns;       // guarded by mu
    bool keyed = false;                 // guarded by mu
    uint64_t cursor = 0;                // guarded by mu
    bool scheduled = false;             // guarded by mu: a worker is reading
    bool dirty = false;                 // guarded by mu: a version came meanwhile
    std::map<uint64_t, std::pair<int64_t, int64_t>> sizes;  // guarded: version -> rows, bytes
  };
  std::map<std::string, std::shared_ptr<TableChannel>> table_channels;  // guarded by mu
  uint64_t alert_listener = 0;
  std::unique_ptr<net::steady_timer> metrics_timer;
  std::unique_ptr<net::steady_timer> tick_timer;
  std::unique_ptr<net::steady_timer> pipeline_timer;
  /// Sessions subscribed to `pipeline`: the graph is computed only while > 0.
  std::atomic<int> pipeline_clients{0};
  /// A worker is computing the periodic graph (the next tick skips, not queues).
  std::atomic<bool> pipeline_busy{false};
  std::map<std::string, int64_t> kpi_runs;  // metrics timer only
  int64_t last_ticks = -1;                  // tick timer only

  void Broadcast(const std::string& channel, std::string frame) {
    std::shared_lock<std::shared_mutex> flight(flight_mu);
    if (stopped) return;
    BroadcastLocked(channel, std::move(frame));
  }

  /// Broadcast with flight_mu held (shared) and not stopped.
  void BroadcastLocked(const std::string& channel, std::string frame) {
    auto shared = std::make_shared<const std::string>(std::move(frame));
    std::vector<std::shared_ptr<WsSession>> targets;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto& [id, weak] : sessions) {
        if (auto s = weak.lock()) targets.push_back(std::move(s));
      }
    }
    for (auto& s : targets) s->Post(channel, shared);
  }

  /// Subscribe to `table` once (kept until Stop). KeyError if unknown.
  Status EnsureTable(const std::string& table) {
    {
      std::shared_lock<std::shared_mutex> flight(flight_mu);
      std::lock_guard<std::mutex> lock(mu);
      if (stopped || table_subs.count(table) > 0) return Status::OK();
    }
    auto tc = std::make_shared<TableChannel>();
    tc->table = table;
    tc->channel = "table:" + table;
    {
      std::lock_guard<std::mutex> lock(tc->mu);
      OpenFeedLocked(*tc);
    }
    std::weak_ptr<State> weak = weak_from_this();
    auto id = ctx.engine->Subscribe(
        table, [weak, tc](const std::shared_ptr<const TableVersion>& v) {
          // Tick thread: note the version's size and wake the reader; nothing blocks.
          auto self = weak.lock();
          if (!self) return;
          {
            std::lock_guard<std::mutex> lock(tc->mu);
            tc->sizes[v->version()] = {v->num_rows(), v->nbytes()};
            while (tc->sizes.size() > 4096) tc->sizes.erase(tc->sizes.begin());
            if (tc->scheduled) {
              tc->dirty = true;
              return;
            }
            tc->scheduled = true;
          }
          self->ScheduleRead(tc);
        });
    RILL_RETURN_NOT_OK(id.status());
    std::shared_lock<std::shared_mutex> flight(flight_mu);
    std::lock_guard<std::mutex> lock(mu);
    if (table_subs.count(table) > 0 || stopped) {
      (void)ctx.engine->Unsubscribe(table, *id);
    } else {
      table_subs[table] = *id;
      table_channels[table] = tc;
    }
    return Status::OK();
  }

  /// Open the table's change feed if the table exists (a declared table gets
  /// its schema with its first rows).
  void OpenFeedLocked(TableChannel& tc) {
    if (tc.feed) return;
    auto live = ctx.engine->GetTable(tc.table);
    if (!live.ok()) return;
    tc.feed = (*live)->OpenChangeFeed();
    tc.cursor = tc.feed->current_version();
    tc.keyed = (*live)->keyed();
    tc.key_columns.clear();
    if (tc.keyed) {
      for (const auto& k : (*live)->primary_key()) {
        tc.key_columns.push_back((*live)->schema()->GetFieldIndex(k));
      }
    }
  }

  void ScheduleRead(std::shared_ptr<TableChannel> tc) {
    bool queued = server.Submit([self = shared_from_this(), tc] { self->ReadTable(*tc); });
    if (!queued) {
      // Busy: the next version tries again.
      std::lock_guard<std::mutex> lock(tc->mu);
      tc->scheduled = false;
    }
  }

  /// Worker: read the feed up to the current version, format the rows once
  /// and hand them to every client subscribed to the channel.
  void ReadTable(TableChannel& tc) {
    for (;;) {
      std::shared_lock<std::shared_mutex> flight(flight_mu);
      if (stopped) return;
      std::shared_ptr<ChangeFeed> feed;
      uint64_t cursor;
      std::vector<int> keys;
      bool keyed;
      bool opened = false;
      {
        std::lock_guard<std::mutex> lock(tc.mu);
        tc.dirty = false;
        opened = !tc.feed;
        OpenFeedLocked(tc);
        opened = opened && tc.feed;
        feed = tc.feed;
        cursor = tc.cursor;
        keys = tc.key_columns;
        keyed = tc.keyed;
      }
      std::shared_ptr<const WsTableChanges> out;
      if (opened) {
        // First rows of a declared table: every client takes a snapshot.
        auto fresh = std::make_shared<WsTableChanges>();
        fresh->snapshot = true;
        fresh->to_version = cursor;
        out = std::move(fresh);
      } else if (feed) {
        ChangeReadOptions options;
        options.max_rows = kTableReadRows;
        // Keyed tables: clients mirror the table, expired keys included.
        // Append tables: appended rows only (retention is the client's window).
        options.emit_retention_deletes = keyed;
        auto changes = feed->Read(cursor, options);
        if (changes.ok() && changes->num_rows > kTablePendingRows) {
          // More than any client may have pending: they all take snapshots
          // (bounded), so these rows are not formatted at all.
          changes->snapshot = true;
          changes->batches.clear();
        }
        if (changes.ok()) {
          auto formatted = FormatChanges(*changes, keys);
          if (formatted.ok()) {
            auto copy = std::make_shared<WsTableChanges>(**formatted);
            {
              std::lock_guard<std::mutex> lock(tc.mu);
              auto it = tc.sizes.find(copy->to_version);
              if (it != tc.sizes.end()) {
                copy->table_rows = it->second.first;
                copy->table_bytes = it->second.second;
              } else if (!tc.sizes.empty()) {
                copy->table_rows = tc.sizes.rbegin()->second.first;
                copy->table_bytes = tc.sizes.rbegin()->second.second;
              }
            }
            // The frame of every client that is up to date, formatted once
            // (WsSession::OnChanges); one that fell behind merges its own.
            WsPendingChanges fresh;
            fresh.Reset(copy->from_version);
            const int64_t merged =
                copy->snapshot ? -1 : fresh.Merge(*copy, kTablePendingRows);
            if (merged >= 0) {
              bool more = false;
              std::string data = fresh.TakeFrame(tc.table, kTableFrameRows, &more);
              if (!more) {
                copy->frame = std::make_shared<const std::string>(EventFrame(tc.channel, data));
                copy->frame_merged = merged;
              }
            }
            out = std::move(copy);
          }
        }
        if (out) {
          feed->Acknowledge(out->to_version);
          std::lock_guard<std::mutex> lock(tc.mu);
          tc.cursor = out->to_version;
        }
      }
      if (out && (out->snapshot || out->to_version > cursor)) BroadcastChanges(tc.channel, out);
      std::lock_guard<std::mutex> lock(tc.mu);
      const bool behind = tc.feed && tc.cursor < tc.feed->current_version() && out != nullptr;
      if (!tc.dirty && !behind) {
        tc.scheduled = false;
        return;
      }
    }
  }

  /// Hand `changes` to every session (flight_mu held shared, not stopped).
  void BroadcastChanges(const std::string& channel,
                        const std::shared_ptr<const WsTableChanges>& changes) {
    std::vector<std::shared_ptr<WsSession>> targets;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto& [id, weak] : sessions) {
        if (auto s = weak.lock()) targets.push_back(std::move(s));
      }
    }
    for (auto& s : targets) s->PostChanges(channel, changes);
  }

  /// Worker: the snapshot frame of `table` now (null if the table has no schema yet).
  std::pair<std::shared_ptr<const std::string>, uint64_t> Snapshot(const std::string& table) {
    std::shared_lock<std::shared_mutex> flight(flight_mu);
    if (stopped) return {nullptr, 0};
    auto live = ctx.engine->GetTable(table);
    if (!live.ok()) return {nullptr, 0};
    auto version = (*live)->snapshot();
    auto frame = SnapshotFrame("table:" + table, table, *version, kTableSnapshotRows);
    if (!frame.ok()) return {nullptr, 0};
    return {std::make_shared<const std::string>(std::move(*frame)), version->version()};
  }

  void ScheduleMetrics() {
    metrics_timer->expires_after(Seconds(ctx.options.ws_metrics_interval_seconds));
    metrics_timer->async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return;
      self->Broadcast("metrics", EventFrame("metrics", TelemetryNowJson(self->ctx)));
      self->PublishKpis();
      self->ScheduleMetrics();
    });
  }

  void PublishKpis() {
    if (ctx.metrics == nullptr) return;
    for (const auto& k : ctx.metrics->LatestKpis()) {
      int64_t& seen = kpi_runs[k.query.name];
      if (k.runs == seen) continue;
      seen = k.runs;
      json::object o;
      o["name"] = k.query.name;
      o["value"] = k.value ? JsonNumber(*k.value) : json::value(nullptr);
      o["last_run_at"] = k.last_run_at ? JsonNumber(*k.last_run_at) : json::value(nullptr);
      o["runs"] = k.runs;
      o["errors"] = k.errors;
      o["last_error"] = k.last_error;
      Broadcast("kpis", EventFrame("kpis", json::serialize(o)));
    }
  }

  /// Worker: the pipeline channel's frame now (empty once stopped).
  /// flight_mu held shared by the caller.
  std::string PipelineFrameLocked() {
    if (stopped) return {};
    return EventFrame("pipeline", pipeline::Catalog::For(ctx.engine).GraphJson());
  }

  void SchedulePipeline() {
    pipeline_timer->expires_after(Seconds(kPipelineIntervalSeconds));
    pipeline_timer->async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return;
      if (self->pipeline_clients.load(std::memory_order_relaxed) > 0 &&
          !self->pipeline_busy.exchange(true)) {
        // GraphJson reads every object's counters: off the io threads.
        bool queued = self->server.Submit([self] {
          {
            std::shared_lock<std::shared_mutex> flight(self->flight_mu);
            std::string frame = self->PipelineFrameLocked();
            if (!frame.empty()) self->BroadcastLocked("pipeline", std::move(frame));
          }
          self->pipeline_busy.store(false);
        });
        if (!queued) self->pipeline_busy.store(false);  // busy: the next second tries again
      }
      self->SchedulePipeline();
    });
  }

  void ScheduleTickSample() {
    tick_timer->expires_after(std::chrono::milliseconds(50));
    tick_timer->async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return;
      EngineMetrics m = self->ctx.engine->GetMetrics();
      if (self->last_ticks >= 0 && m.ticks != self->last_ticks) {
        self->ctx.tick_seconds.Observe(m.last_batch_latency_s);
      }
      self->last_ticks = m.ticks;
      self->ScheduleTickSample();
    });
  }

  void OnAlert(const AlertRecord& a) {
    std::shared_lock<std::shared_mutex> flight(flight_mu);
    if (stopped) return;  // ctx may be going away
    {
      std::lock_guard<std::mutex> lock(ctx.alerts_mu);
      ctx.alerts_by[{SeverityName(a.severity), EventSourceName(a.source)}] += a.count;
    }
    json::object o;
    o["ts"] = a.ts;
    o["severity"] = SeverityName(a.severity);
    o["source"] = EventSourceName(a.source);
    o["component"] = a.component;
    o["message"] = a.message;
    o["detail"] = a.detail;
    o["rule"] = a.rule;
    o["value"] = a.value ? JsonNumber(*a.value) : json::value(nullptr);
    o["threshold"] = a.threshold ? JsonNumber(*a.threshold) : json::value(nullptr);
    o["count"] = a.count;
    BroadcastLocked("alerts", EventFrame("alerts", json::serialize(o)));
  }
};

WsSession::WsSession(std::shared_ptr<WsHub::State> hub, beast::tcp_stream stream,
                     std::shared_ptr<void> slot)
    : hub_(std::move(hub)), ws_(std::move(stream)), slot_(std::move(slot)) {
  hub_->ctx.counters.http_open.fetch_sub(1, std::memory_order_relaxed);
  hub_->ctx.counters.websocket_open.fetch_add(1, std::memory_order_relaxed);
}

WsSession::~WsSession() {
  if (channels_.count("pipeline") > 0) hub_->pipeline_clients.fetch_sub(1);
  hub_->server.RemoveSession(id_);
  {
    std::lock_guard<std::mutex> lock(hub_->mu);
    hub_->sessions.erase(id_);
  }
  // The slot's deleter counts an HTTP connection closing.
  hub_->ctx.counters.websocket_open.fetch_sub(1, std::memory_order_relaxed);
  hub_->ctx.counters.http_open.fetch_add(1, std::memory_order_relaxed);
}

void WsSession::Run(beast::flat_buffer buffer, http::request<http::string_body> request) {
  id_ = hub_->server.AddSession(weak_from_this());
  {
    std::lock_guard<std::mutex> lock(hub_->mu);
    hub_->sessions[id_] = weak_from_this();
  }
  // Bytes the HTTP parser read past the request are the client's first frames:
  // hand Beast the request again followed by them, so it keeps them.
  std::ostringstream raw;
  raw << request;
  std::string handshake = raw.str() + beast::buffers_to_string(buffer.data());
  beast::get_lowest_layer(ws_).expires_never();
  websocket::stream_base::timeout timeouts;
  timeouts.handshake_timeout = Seconds(hub_->ctx.options.header_timeout_seconds);
  // Beast pings after half the idle time and closes when nothing comes back.
  timeouts.idle_timeout = Seconds(2 * hub_->ctx.options.ws_ping_interval_seconds);
  timeouts.keep_alive_pings = true;
  ws_.set_option(timeouts);
  // Room for `ingest` batches (ingest.h), as for an HTTP request body.
  ws_.read_message_max(static_cast<uint64_t>(hub_->ctx.options.max_body_bytes));
  // A browser that offered subprotocols (the token rides in one, auth.h)
  // needs one of them selected in the answer.
  if (request.find(http::field::sec_websocket_protocol) != request.end()) {
    ws_.set_option(websocket::stream_base::decorator([](websocket::response_type& res) {
      res.set(http::field::sec_websocket_protocol, kWebSocketProtocol);
    }));
  }
  ws_.async_accept(net::buffer(handshake), [self = shared_from_this()](beast::error_code ec) {
    if (ec) return;
    self->Reply("{\"type\":\"hello\",\"channels\":[\"metrics\",\"alerts\",\"kpis\",\"pipeline\","
                "\"table:<name>\"]}");
    self->Read();
  });
}

void WsSession::Read() {
  ws_.async_read(read_buffer_, [self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec) return;  // closed, timed out, or a protocol error (Beast closed it)
    self->OnMessage();
    self->read_buffer_.consume(self->read_buffer_.size());
    self->Read();
  });
}

void WsSession::OnMessage() {
  std::string text = beast::buffers_to_string(read_buffer_.data());
  auto obj = ParseJsonObject(text);
  auto error = [this](std::string_view message) {
    std::string out = "{\"type\":\"error\",\"message\":";
    AppendJsonString(message, &out);
    Reply(out + "}");
  };
  if (!obj.ok()) return error(obj.status().message());
  auto type = GetString(*obj, "type");
  if (!type.ok() || !type->has_value()) return error("field 'type' (a string) is required");
  if (**type == "ping") return Reply("{\"type\":\"pong\"}");
  if (**type == "ingest") return IngestOnWorker(std::move(*obj));
  bool subscribe = **type == "subscribe";
  if (!subscribe && **type != "unsubscribe") {
    return error("unknown message type '" + **type +
                 "': use subscribe, unsubscribe, ingest or ping");
  }
  const json::value* list = obj->if_contains("channels");
  if (list == nullptr || !list->is_array()) return error("field 'channels' must be an array");
  std::vector<std::string> new_tables;
  bool new_pipeline = false;
  for (const auto& v : list->as_array()) {
    if (!v.is_string()) return error("channel names must be strings");
    std::string channel(v.as_string());
    if (!subscribe) {
      if (channel == "pipeline" && channels_.count(channel) > 0) hub_->pipeline_clients.fetch_sub(1);
      channels_.erase(channel);
      tables_.erase(channel);
      continue;
    }
    if (channel.rfind("table:", 0) == 0) {
      Status st = hub_->EnsureTable(channel.substr(6));
      if (!st.ok()) return error(st.message());
      if (tables_.count(channel) == 0) {
        tables_[channel];
        new_tables.push_back(channel);
      }
    } else if (channel == "pipeline") {
      if (channels_.count(channel) == 0) {
        hub_->pipeline_clients.fetch_add(1);
        new_pipeline = true;
      }
    } else if (channel != "metrics" && channel != "alerts" && channel != "kpis") {
      return error("unknown channel '" + channel +
                   "': use metrics, alerts, kpis, pipeline or table:<name>");
    }
    channels_.insert(channel);
  }
  json::array current;
  for (const auto& c : channels_) current.emplace_back(c);
  std::string reply = json::serialize(json::object{
      {"type", subscribe ? "subscribed" : "unsubscribed"}, {"channels", std::move(current)}});
  // The graph follows the reply (a worker computes it).
  if (new_pipeline) SendPipelineNow();
  if (new_tables.empty()) return Reply(std::move(reply));
  // Each new table channel starts with a snapshot of the current state; the
  // reply follows them, so changes written after it come as events.
  auto pending = std::make_shared<PendingReply>();
  pending->waiting = static_cast<int>(new_tables.size());
  pending->text = std::move(reply);
  for (const auto& channel : new_tables) RequestSnapshot(channel, pending);
}

void WsSession::SendPipelineNow() {
  auto self = shared_from_this();
  // Workers busy: the periodic frame comes within a second.
  (void)hub_->server.Submit([self] {
    // Posted with flight_mu held: once Stop returns nothing reaches the io_context.
    std::shared_lock<std::shared_mutex> flight(self->hub_->flight_mu);
    std::string frame = self->hub_->PipelineFrameLocked();
    if (frame.empty()) return;
    self->Post("pipeline", std::make_shared<const std::string>(std::move(frame)));
  });
}

void WsSession::IngestOnWorker(json::object message) {
  auto self = shared_from_this();
  bool queued = hub_->server.Submit([self, message = std::move(message)] {
    std::string ack = WsIngest(self->hub_->ctx, message);
    net::post(self->ws_.get_executor(),
              [self, ack = std::move(ack)]() mutable { self->Reply(std::move(ack)); });
  });
  if (!queued) {
    json::object ack{{"type", "ingest_ack"}, {"status", 503}, {"message", "server busy"}};
    if (const json::value* id = message.if_contains("id")) ack["id"] = *id;
    Reply(json::serialize(ack));
  }
}

void WsSession::Enqueue(std::string channel, std::shared_ptr<const std::string> frame,
                        bool keep) {
  if (closing_) return;
  if (channel == "pipeline") {
    // At most one pending graph per client: a newer one replaces it.
    for (size_t i = writing_ ? 1 : 0; i < queue_.size(); ++i) {
      if (queue_[i].channel == channel) {
        queue_[i].text = std::move(frame);
        ++coalesced_;
        notice_pending_ = true;
        hub_->ctx.counters.ws_frames_coalesced.fetch_add(1, std::memory_order_relaxed);
        return;
      }
    }
  }
  auto limit = static_cast<size_t>(hub_->ctx.options.ws_queue_frames);
  if (!keep && queue_.size() >= limit) {
    // Full: replace the queued frame of the same channel (the newest state
    // supersedes it), else drop the oldest frame. Skip the frame being written.
    bool replaced = false;
    if (Coalescible(channel)) {
      for (size_t i = writing_ ? 1 : 0; i < queue_.size(); ++i) {
        if (queue_[i].channel == channel && !queue_[i].keep) {
          queue_[i].text = std::move(frame);
          replaced = true;
          break;
        }
      }
    }
    notice_pending_ = true;
    if (replaced) {
      ++coalesced_;
      hub_->ctx.counters.ws_frames_coalesced.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    size_t victim = writing_ ? 1 : 0;
    while (victim < queue_.size() && queue_[victim].keep) ++victim;
    if (victim < queue_.size()) {
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(victim));
    }
    ++dropped_;
    hub_->ctx.counters.ws_frames_dropped.fetch_add(1, std::memory_order_relaxed);
  }
  queue_.push_back(Frame{std::move(channel), std::move(frame), keep});
  if (!writing_) WriteNext();
}

void WsSession::OnChanges(const std::string& channel, const WsTableChanges& changes) {
  auto it = tables_.find(channel);
  if (it == tables_.end() || closing_) return;
  TableState& st = it->second;
  if (changes.frame && !changes.snapshot && !st.awaiting && !st.queued && !st.pending.due() &&
      st.pending.client_version() == changes.from_version && queue_.size() < 2) {
    // Up to date (at most the frame being written ahead): the shared frame.
    if (changes.frame_merged > 0) {
      ++coalesced_;
      notice_pending_ = true;
      hub_->ctx.counters.ws_frames_coalesced.fetch_add(1, std::memory_order_relaxed);
    }
    st.pending.Reset(changes.to_version);
    Enqueue(channel, changes.frame, /*keep=*/true);
    return;
  }
  if (changes.snapshot) {
    // The hub's feed fell behind (or the table just got its schema).
    if (st.awaiting) {
      st.resnapshot = true;
      st.dropped_to = std::max(st.dropped_to, changes.to_version);
    } else {
      RequestSnapshot(channel);
    }
    return;
  }
  const int64_t merged = st.pending.Merge(changes, kTablePendingRows);
  if (merged < 0) {
    // Too far behind to merge: a snapshot replaces what is pending.
    ++coalesced_;
    notice_pending_ = true;
    hub_->ctx.counters.ws_frames_coalesced.fetch_add(1, std::memory_order_relaxed);
    if (st.awaiting) {
      st.resnapshot = true;
      st.dropped_to = std::max(st.dropped_to, changes.to_version);
    } else {
      RequestSnapshot(channel);
    }
    return;
  }
  if (st.awaiting) return;  // the snapshot goes first
  if (st.queued || merged > 0) {
    // The client has not taken the previous changes yet: merged (by key).
    ++coalesced_;
    notice_pending_ = true;
    hub_->ctx.counters.ws_frames_coalesced.fetch_add(1, std::memory_order_relaxed);
    if (st.queued) return;
  }
  if (st.pending.due()) QueueMarker(channel);
}

void WsSession::QueueMarker(const std::string& channel) {
  tables_[channel].queued = true;
  queue_.push_back(Frame{channel, nullptr, /*keep=*/true});
  if (!writing_) WriteNext();
}

void WsSession::RequestSnapshot(const std::string& channel,
                                std::shared_ptr<PendingReply> reply) {
  tables_[channel].awaiting = true;
  auto self = shared_from_this();
  bool queued = hub_->server.Submit([self, channel, reply] {
    // Not a structured binding: clang 14 cannot capture one in a lambda.
    auto snapshot = self->hub_->Snapshot(channel.substr(6));
    net::post(self->ws_.get_executor(),
              [self, channel, frame = std::move(snapshot.first), version = snapshot.second,
               reply] {
                self->OnSnapshot(channel, frame, version, reply);
              });
  });
  if (!queued) {
    // Workers busy: go on without (the next change brings the rows).
    net::post(ws_.get_executor(),
              [self, channel, reply] { self->OnSnapshot(channel, nullptr, 0, reply); });
  }
}

void WsSession::OnSnapshot(const std::string& channel, std::shared_ptr<const std::string> frame,
                           uint64_t version, const std::shared_ptr<PendingReply>& reply) {
  auto it = tables_.find(channel);
  if (it == tables_.end() || closing_) {
    if (reply && --reply->waiting == 0) Reply(std::move(reply->text));
    return;
  }
  TableState& st = it->second;
  const bool frame_sent = frame != nullptr;
  if (frame) {
    st.pending.Reset(version);
    Enqueue(channel, std::move(frame), /*keep=*/true);
    frame = nullptr;
  }
  if (reply && --reply->waiting == 0) Reply(std::move(reply->text));
  st.awaiting = false;
  if (st.resnapshot) {
    st.resnapshot = false;
    if (!frame_sent || version < st.dropped_to) {
      RequestSnapshot(channel);
      return;
    }
  }
  st.dropped_to = 0;
  if (st.pending.due() && !st.queued) QueueMarker(channel);
}

void WsSession::WriteNext() {
  if (queue_.empty() || closing_) {
    writing_ = false;
    return;
  }
  if (notice_pending_ && queue_.size() < static_cast<size_t>(hub_->ctx.options.ws_queue_frames)) {
    notice_pending_ = false;
    std::string notice = "{\"type\":\"notice\",\"message\":\"client too slow: frames were "
                         "coalesced or dropped\",\"dropped\":" + std::to_string(dropped_) +
                         ",\"coalesced\":" + std::to_string(coalesced_) + "}";
    dropped_ = coalesced_ = 0;
    queue_.push_front(Frame{"", std::make_shared<const std::string>(std::move(notice))});
  }
  while (!queue_.empty() && !queue_.front().text) {
    // A table channel's marker: format its pending changes now.
    Frame& f = queue_.front();
    auto it = tables_.find(f.channel);
    if (it == tables_.end() || it->second.awaiting || !it->second.pending.due()) {
      if (it != tables_.end()) it->second.queued = false;
      queue_.pop_front();
      continue;
    }
    TableState& st = it->second;
    st.queued = false;
    bool more = false;
    std::string data = st.pending.TakeFrame(f.channel.substr(6), kTableFrameRows, &more);
    f.text = std::make_shared<const std::string>(EventFrame(f.channel, data));
    if (more) {
      st.queued = true;
      queue_.push_back(Frame{f.channel, nullptr, /*keep=*/true});
    }
  }
  if (queue_.empty()) {
    writing_ = false;
    return;
  }
  writing_ = true;
  ws_.text(true);
  ws_.async_write(net::buffer(*queue_.front().text),
                  [self = shared_from_this()](beast::error_code ec, size_t) {
                    self->queue_.pop_front();
                    if (ec) {
                      self->writing_ = false;
                      self->closing_ = true;
                      return;
                    }
                    self->hub_->ctx.counters.ws_frames_sent.fetch_add(
                        1, std::memory_order_relaxed);
                    self->WriteNext();
                  });
}

// Hub --------------------------------------------------------------------------------

WsHub::WsHub(Server::Impl& server) : state_(std::make_shared<State>(server)) {}

WsHub::~WsHub() { Stop(); }

void WsHub::Start() {
  State& s = *state_;
  s.metrics_timer = std::make_unique<net::steady_timer>(net::make_strand(*s.server.ioc));
  s.tick_timer = std::make_unique<net::steady_timer>(net::make_strand(*s.server.ioc));
  s.pipeline_timer = std::make_unique<net::steady_timer>(net::make_strand(*s.server.ioc));
  s.ScheduleMetrics();
  s.SchedulePipeline();
  s.ScheduleTickSample();
  if (s.ctx.metrics != nullptr) {
    std::weak_ptr<State> weak = state_;
    s.alert_listener = s.ctx.metrics->AddAlertListener([weak](const AlertRecord& a) {
      if (auto self = weak.lock()) self->OnAlert(a);
    });
  }
}

void WsHub::Stop() {
  State& s = *state_;
  std::map<std::string, LiveTable::SubscriptionId> subs;
  {
    std::unique_lock<std::shared_mutex> flight(s.flight_mu);  // first, as everywhere
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.stopped) return;
    s.stopped = true;
    subs.swap(s.table_subs);
    s.table_channels.clear();  // their feeds close with the last reader
  }
  if (s.alert_listener != 0) s.ctx.metrics->RemoveAlertListener(s.alert_listener);
  for (auto& [table, id] : subs) (void)s.ctx.engine->Unsubscribe(table, id);
  net::post(s.metrics_timer->get_executor(), [st = state_] { if (st->metrics_timer) st->metrics_timer->cancel(); });
  net::post(s.tick_timer->get_executor(), [st = state_] { if (st->tick_timer) st->tick_timer->cancel(); });
  net::post(s.pipeline_timer->get_executor(),
            [st = state_] { if (st->pipeline_timer) st->pipeline_timer->cancel(); });
}

void WsHub::ReleaseTimers() {
  state_->metrics_timer.reset();
  state_->tick_timer.reset();
  state_->pipeline_timer.reset();
}

void WsHub::Accept(beast::tcp_stream stream, beast::flat_buffer buffer,
                   http::request<http::string_body> request, std::shared_ptr<void> slot) {
  auto session = std::make_shared<WsSession>(state_, std::move(stream), std::move(slot));
  session->Run(std::move(buffer), std::move(request));
}

}  // namespace rill::server
