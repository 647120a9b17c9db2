#include "rill/server/ws_hub.h"

#include "rill/server/auth.h"

#include <deque>
#include <set>
#include <shared_mutex>
#include <sstream>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket.hpp>

#include "rill/engine/engine.h"
#include "rill/metrics/metrics_store.h"
#include "rill/server/ingest.h"  // the `ingest` message
#include "rill/server/json_body.h"
#include "rill/server/json_writer.h"
#include "rill/server/server_impl.h"

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

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// {"type":"event","channel":...,"ts":...,"data":<data>}
std::string EventFrame(std::string_view channel, std::string_view data) {
  std::string out = "{\"type\":\"event\",\"channel\":";
  AppendJsonString(channel, &out);
  out += ",\"ts\":";
  AppendJsonNumber(WallNow(), &out);
  out += ",\"data\":";
  out += data;
  out += "}";
  return out;
}

bool Coalescible(const std::string& channel) { return channel != "alerts"; }

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
  void Enqueue(std::string channel, std::shared_ptr<const std::string> frame);
  void WriteNext();

  struct Frame {
    std::string channel;
    std::shared_ptr<const std::string> text;
  };

  std::shared_ptr<WsHub::State> hub_;
  websocket::stream<beast::tcp_stream> ws_;
  std::shared_ptr<void> slot_;
  beast::flat_buffer read_buffer_;
  std::set<std::string> channels_;
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
  uint64_t alert_listener = 0;
  std::unique_ptr<net::steady_timer> metrics_timer;
  std::unique_ptr<net::steady_timer> tick_timer;
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
    std::weak_ptr<State> weak = weak_from_this();
    std::string channel = "table:" + table;
    auto id = ctx.engine->Subscribe(
        table, [weak, channel, table](const std::shared_ptr<const TableVersion>& v) {
          // Tick thread: format a few numbers and post; nothing blocks.
          auto self = weak.lock();
          if (!self) return;
          std::string data = "{\"table\":";
          AppendJsonString(table, &data);
          data += ",\"version\":" + std::to_string(v->version()) +
                  ",\"rows\":" + std::to_string(v->num_rows()) +
                  ",\"bytes\":" + std::to_string(v->nbytes()) + "}";
          self->Broadcast(channel, EventFrame(channel, data));
        });
    RILL_RETURN_NOT_OK(id.status());
    std::shared_lock<std::shared_mutex> flight(flight_mu);
    std::lock_guard<std::mutex> lock(mu);
    if (table_subs.count(table) > 0 || stopped) {
      (void)ctx.engine->Unsubscribe(table, *id);
    } else {
      table_subs[table] = *id;
    }
    return Status::OK();
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
    self->Reply("{\"type\":\"hello\",\"channels\":[\"metrics\",\"alerts\",\"kpis\",\"table:<name>\"]}");
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
  for (const auto& v : list->as_array()) {
    if (!v.is_string()) return error("channel names must be strings");
    std::string channel(v.as_string());
    if (!subscribe) {
      channels_.erase(channel);
      continue;
    }
    if (channel.rfind("table:", 0) == 0) {
      Status st = hub_->EnsureTable(channel.substr(6));
      if (!st.ok()) return error(st.message());
    } else if (channel != "metrics" && channel != "alerts" && channel != "kpis") {
      return error("unknown channel '" + channel + "': use metrics, alerts, kpis or table:<name>");
    }
    channels_.insert(channel);
  }
  json::array current;
  for (const auto& c : channels_) current.emplace_back(c);
  Reply(json::serialize(json::object{{"type", subscribe ? "subscribed" : "unsubscribed"},
                                     {"channels", std::move(current)}}));
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

void WsSession::Enqueue(std::string channel, std::shared_ptr<const std::string> frame) {
  if (closing_) return;
  auto limit = static_cast<size_t>(hub_->ctx.options.ws_queue_frames);
  if (queue_.size() >= limit) {
    // Full: replace the queued frame of the same channel (the newest state
    // supersedes it), else drop the oldest frame. Skip the frame being written.
    bool replaced = false;
    if (Coalescible(channel)) {
      for (size_t i = writing_ ? 1 : 0; i < queue_.size(); ++i) {
        if (queue_[i].channel == channel) {
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
    if (victim < queue_.size()) {
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(victim));
    }
    ++dropped_;
    hub_->ctx.counters.ws_frames_dropped.fetch_add(1, std::memory_order_relaxed);
  }
  queue_.push_back(Frame{std::move(channel), std::move(frame)});
  if (!writing_) WriteNext();
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
  s.ScheduleMetrics();
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
  }
  if (s.alert_listener != 0) s.ctx.metrics->RemoveAlertListener(s.alert_listener);
  for (auto& [table, id] : subs) (void)s.ctx.engine->Unsubscribe(table, id);
  net::post(s.metrics_timer->get_executor(), [st = state_] { if (st->metrics_timer) st->metrics_timer->cancel(); });
  net::post(s.tick_timer->get_executor(), [st = state_] { if (st->tick_timer) st->tick_timer->cancel(); });
}

void WsHub::ReleaseTimers() {
  state_->metrics_timer.reset();
  state_->tick_timer.reset();
}

void WsHub::Accept(beast::tcp_stream stream, beast::flat_buffer buffer,
                   http::request<http::string_body> request, std::shared_ptr<void> slot) {
  auto session = std::make_shared<WsSession>(state_, std::move(stream), std::move(slot));
  session->Run(std::move(buffer), std::move(request));
}

}  // namespace rill::server
