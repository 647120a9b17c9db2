// HttpSession: one HTTP/1.1 connection. Reads a request under the header and
// body limits, hands it to a worker, writes the reply (Content-Length or
// chunked), repeats while keep-alive. Upgrades /api/v1/stream to WebSocket.
#include <algorithm>
#include <chrono>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include "rill/server/auth.h"
#include "rill/server/server_impl.h"
#include "rill/server/ws_hub.h"

namespace rill::server {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

/// Free room in the read buffer while a body is read (bytes per read call).
constexpr size_t kBodyReadBytes = 64 * 1024;
/// After refusing a request on its headers (401), read and discard at most
/// this much of its body before closing.
constexpr size_t kUnauthenticatedDrainBytes = 64 * 1024;
/// The largest body of a request to a route that needs no token (login).
constexpr uint64_t kUnauthenticatedBodyBytes = 64 * 1024;

std::chrono::steady_clock::duration Seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

class HttpSession : public Closable, public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(Server::Impl& server, tcp::socket socket, std::shared_ptr<void> slot)
      : server_(server),
        stream_(std::move(socket)),
        executor_(stream_.get_executor()),
        slot_(std::move(slot)) {}

  ~HttpSession() override { server_.RemoveSession(id_); }

  void Run(std::string initial) {
    id_ = server_.AddSession(weak_from_this());
    auto buf = buffer_.prepare(initial.size());
    net::buffer_copy(buf, net::buffer(initial));
    buffer_.commit(initial.size());
    boost::system::error_code ec;
    auto remote = stream_.socket().remote_endpoint(ec);
    if (!ec) {
      remote_ = remote.address().to_string() + ":" + std::to_string(remote.port());
    }
    ReadHeader();
  }

  void Close() override {
    // The saved executor: after an upgrade stream_ is moved out.
    net::post(executor_, [self = shared_from_this()] {
      if (self->upgraded_) return;  // the WebSocket session closes itself
      boost::system::error_code ec;
      self->stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
      self->stream_.close();
    });
  }

 private:
  const ServerOptions& options() const { return server_.options; }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(options().max_header_bytes));
    parser_->body_limit(static_cast<uint64_t>(options().max_body_bytes));
    stream_.expires_after(Seconds(first_ ? options().header_timeout_seconds
                                         : options().idle_timeout_seconds));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              self->OnHeader(ec);
                            });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) {
      return OnReadError(ec, /*in_header=*/true);
    }
    first_ = false;
    if (server_.stopping.load()) {
      return Shutdown();
    }
    // The token is checked on the headers: a client without it never makes
    // the server read (and hold) a body.
    if (!AuthorizeHeader()) {
      return;
    }
    // The header of a keep-alive request must also come within the header
    // timeout once its first byte is in; the body gets the idle timeout.
    stream_.expires_after(Seconds(options().idle_timeout_seconds));
    // Beast reads at most the buffer's free capacity per call (at least 512
    // bytes): a buffer left at the size of the headers reads a large body
    // 512 bytes per system call. Room for large reads once a body comes.
    const auto length = parser_->content_length();
    if ((length && *length > 0) || parser_->chunked()) {
      buffer_.reserve(std::min<size_t>(length ? static_cast<size_t>(*length) : kBodyReadBytes,
                                       kBodyReadBytes));
    }
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->OnRequest(ec);
                     });
  }

  /// Check the request's credentials on its headers alone. True to go on and
  /// read the body; false when a refusal (401, or 400/413 for a request that
  /// cannot be one) is on its way and the connection will be closed after at
  /// most kUnauthenticatedDrainBytes more bytes are read and discarded.
  bool AuthorizeHeader() {
    const auto& header = parser_->get();
    HttpRequest head;
    head.remote = remote_;
    head.method = std::string(header.method_string());
    if (Status target = ParseTarget(header.target(), &head.path, &head.query); !target.ok()) {
      RefuseAndDrain(ErrorReply(400, target.message()));
      return false;
    }
    const auto length = parser_->content_length();
    const bool has_body = (length && *length > 0) || parser_->chunked();
    if (!RequiresToken(head.path)) {
      // Public routes (login, static files) take small bodies only.
      if (length && *length > kUnauthenticatedBodyBytes) {
        RefuseAndDrain(ErrorReply(413, "a request without the token may carry at most " +
                                           std::to_string(kUnauthenticatedBodyBytes) +
                                           " bytes of body"));
        return false;
      }
      parser_->body_limit(std::min<uint64_t>(kUnauthenticatedBodyBytes,
                                             static_cast<uint64_t>(options().max_body_bytes)));
      return true;
    }
    for (const auto& field : header) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      head.headers[name] = std::string(field.value());
    }
    // A CORS preflight carries no credentials (and no body): the handler
    // answers it or refuses it.
    if (header.method() == http::verb::options && !has_body) {
      return true;
    }
    if (IsAuthorized(head, server_.token, server_.options.admin_token)) {
      return true;
    }
    // The handler's own refusal (401 with WWW-Authenticate and, for an
    // allowed origin, the CORS headers): it runs no SQL and reads no body.
    RefuseAndDrain(HandleRequest(*server_.ctx, head));
    return false;
  }

  /// Write `reply` and close the connection after reading and discarding at
  /// most kUnauthenticatedDrainBytes of what the client still sends (closing
  /// with unread bytes would reset the connection and could destroy the reply
  /// before the client reads it).
  void RefuseAndDrain(HttpReply reply) {
    reply.close = true;
    drain_after_write_ = true;
    Write(std::move(reply));
  }

  void Drain() {
    boost::system::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    drain_buffer_.resize(16 * 1024);
    stream_.expires_after(Seconds(std::min(2.0, options().header_timeout_seconds)));
    stream_.async_read_some(net::buffer(drain_buffer_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ >= kUnauthenticatedDrainBytes) {
                                self->stream_.close();
                                return;
                              }
                              self->Drain();
                            });
  }

  void OnReadError(beast::error_code ec, bool in_header) {
    if (ec == http::error::header_limit) {
      return WriteError(431, "the request line and headers exceed max_header_bytes (" +
                                 std::to_string(options().max_header_bytes) + " bytes)");
    }
    if (ec == http::error::body_limit) {
      return WriteError(413, "the request body exceeds max_body_bytes (" +
                                 std::to_string(options().max_body_bytes) + " bytes)");
    }
    if (ec == beast::error::timeout || ec == http::error::end_of_stream ||
        ec == net::error::eof || ec == net::error::operation_aborted ||
        ec == net::error::connection_reset || ec == http::error::partial_message) {
      return Shutdown();
    }
    // Any other parse error: the request is malformed.
    (void)in_header;
    WriteError(400, "malformed HTTP request: " + ec.message());
  }

  void OnRequest(beast::error_code ec) {
    if (ec) {
      return OnReadError(ec, /*in_header=*/false);
    }
    stream_.expires_never();
    http::request<http::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive();
    head_ = req.method() == http::verb::head;
    HttpRequest request;
    request.remote = remote_;
    bool upgrade = beast::websocket::is_upgrade(req);
    if (!upgrade) {
      Status filled = FillHttpRequest(req, &request);
      if (!filled.ok()) {
        return WriteError(400, filled.message());
      }
    } else if (Status target = ParseTarget(req.target(), &request.path, &request.query);
               !target.ok()) {
      return WriteError(400, target.message());
    } else {
      for (const auto& field : req) {
        std::string name(field.name_string());
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        request.headers[name] = std::string(field.value());
      }
    }
    if (upgrade && request.path == "/api/v1/stream") {
      if (!IsAuthorized(request, server_.token, server_.options.admin_token)) {
        return WriteError(401, "unauthorized");
      }
      server_.ctx->counters.requests.fetch_add(1, std::memory_order_relaxed);
      upgraded_ = true;
      return server_.hub->Accept(std::move(stream_), std::move(buffer_), std::move(req),
                                 std::move(slot_));
    }
    if (upgrade) {
      return WriteError(400, "WebSocket upgrades are served at /api/v1/stream only");
    }
    auto self = shared_from_this();
    bool queued = server_.Submit([self, request = std::move(request)]() mutable {
      HttpReply reply = HandleRequest(*self->server_.ctx, request);
      net::post(self->stream_.get_executor(),
                [self, reply = std::move(reply)]() mutable { self->Write(std::move(reply)); });
    });
    if (!queued) {
      WriteError(503, "the server is busy (max_pending_requests reached); retry later");
    }
  }

  void WriteError(int status, std::string message) {
    HttpReply reply = ErrorReply(status, message);
    reply.close = true;
    Write(std::move(reply));
  }

  void Write(HttpReply reply) {
    if (reply.close) {
      keep_alive_ = false;
    }
    stream_.expires_after(Seconds(options().idle_timeout_seconds));
    if (reply.next_chunk) {
      return WriteChunked(std::move(reply));
    }
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(reply.status), 11);
    res->set(http::field::server, "rill");
    if (!reply.content_type.empty()) res->set(http::field::content_type, reply.content_type);
    for (auto& [name, value] : reply.headers) res->insert(name, value);
    res->keep_alive(keep_alive_);
    if (!head_) res->body() = std::move(reply.body);
    res->prepare_payload();
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        self->AfterWrite(ec);
                      });
  }

  void WriteChunked(HttpReply reply) {
    auto res = std::make_shared<http::response<http::empty_body>>(
        static_cast<http::status>(reply.status), 11);
    res->set(http::field::server, "rill");
    res->set(http::field::content_type, reply.content_type);
    for (auto& [name, value] : reply.headers) res->insert(name, value);
    res->keep_alive(keep_alive_);
    res->chunked(true);
    auto sr = std::make_shared<http::response_serializer<http::empty_body>>(*res);
    next_chunk_ = std::move(reply.next_chunk);
    http::async_write_header(stream_, *sr,
                             [self = shared_from_this(), res, sr](beast::error_code ec, size_t) {
                               if (ec) return self->Shutdown();
                               self->ProduceChunk();
                             });
  }

  /// Serialize the next piece on a worker (it may take a while), then write it.
  void ProduceChunk() {
    auto self = shared_from_this();
    auto produce = [self] {
      auto piece = self->next_chunk_();
      net::post(self->stream_.get_executor(), [self, piece = std::move(piece)]() mutable {
        self->WriteChunk(std::move(piece));
      });
    };
    // When the pool is full, produce here: a stream in progress must finish.
    if (!server_.Submit(produce)) {
      produce();
    }
  }

  void WriteChunk(Result<std::optional<std::string>> piece) {
    if (!piece.ok()) {
      return Shutdown();  // the status line is gone: closing tells the client
    }
    stream_.expires_after(Seconds(options().idle_timeout_seconds));
    auto self = shared_from_this();
    if (!piece->has_value()) {
      next_chunk_ = nullptr;
      net::async_write(stream_, http::make_chunk_last(),
                       [self](beast::error_code ec, size_t) { self->AfterWrite(ec); });
      return;
    }
    chunk_ = std::move(**piece);
    if (chunk_.empty()) {
      return ProduceChunk();
    }
    net::async_write(stream_, http::make_chunk(net::buffer(chunk_)),
                     [self](beast::error_code ec, size_t) {
                       if (ec) return self->Shutdown();
                       self->ProduceChunk();
                     });
  }

  void AfterWrite(beast::error_code ec) {
    if (!ec && drain_after_write_ && !server_.stopping.load()) {
      return Drain();
    }
    if (ec || !keep_alive_ || server_.stopping.load()) {
      return Shutdown();
    }
    ReadHeader();
  }

  void Shutdown() {
    boost::system::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
  }

  Server::Impl& server_;
  beast::tcp_stream stream_;
  net::any_io_executor executor_;
  beast::flat_buffer buffer_;
  std::shared_ptr<void> slot_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::function<Result<std::optional<std::string>>()> next_chunk_;
  std::string chunk_;
  std::vector<char> drain_buffer_;
  size_t drained_ = 0;
  bool drain_after_write_ = false;
  std::string remote_;
  uint64_t id_ = 0;
  bool first_ = true;
  bool keep_alive_ = true;
  bool head_ = false;
  bool upgraded_ = false;  // stream_ moved to a WebSocket session (strand only)
};

}  // namespace

void StartHttpSession(Server::Impl& server, tcp::socket socket, std::string initial,
                      std::shared_ptr<void> slot) {
  auto session = std::make_shared<HttpSession>(server, std::move(socket), std::move(slot));
  session->Run(std::move(initial));
}

}  // namespace rill::server
