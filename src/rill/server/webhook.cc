#include "rill/server/webhook.h"

#include <sys/socket.h>
#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include <curl/curl.h>
#include <simdjson.h>

#include "rill/common/logging.h"

namespace rill::server {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr size_t kReplyBodyLimit = 4096;

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

Result<simdjson::dom::element> ParseJson(simdjson::dom::parser& parser,
                                         std::string_view text, const char* what) {
  simdjson::dom::element doc;
  if (auto error = parser.parse(text.data(), text.size()).get(doc); error) {
    return Status::Invalid(what, " is not valid JSON: ", simdjson::error_message(error));
  }
  return doc;
}

/// Return the string member `key` of `object`, if it is one.
std::optional<std::string> StringMember(simdjson::dom::element object, const char* key) {
  std::string_view value;
  if (object.is_object() && !object[key].get_string().get(value)) {
    return std::string(value);
  }
  return std::nullopt;
}

/// Owns a curl easy handle and its header list.
struct CurlRequest {
  CURL* easy = curl_easy_init();
  curl_slist* headers = nullptr;
  curl_slist* connect_to = nullptr;
  ~CurlRequest() {
    curl_slist_free_all(headers);
    curl_slist_free_all(connect_to);
    if (easy != nullptr) {
      curl_easy_cleanup(easy);
    }
  }
};

struct ResponseSink {
  std::string body;
  size_t limit = 0;
};

size_t WriteBody(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<ResponseSink*>(user);
  const size_t n = size * count;
  if (sink->body.size() < sink->limit) {
    sink->body.append(data, std::min(n, sink->limit - sink->body.size()));
  }
  return n;  // the rest is read and discarded
}

/// libcurl's socket callback: refuse to open a socket to anything but the
/// address the guard checked (the last line of defence against rebinding,
/// redirects and proxies).
curl_socket_t OpenPinnedSocket(void* user, curlsocktype purpose, curl_sockaddr* address) {
  const auto* pinned = static_cast<const IpAddress*>(user);
  if (purpose != CURLSOCKTYPE_IPCXN) {
    return CURL_SOCKET_BAD;
  }
  bool same = false;
  if (address->family == AF_INET && !pinned->v6) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(&address->addr);
    same = std::memcmp(&sin->sin_addr, pinned->bytes.data(), 4) == 0;
  } else if (address->family == AF_INET6 && pinned->v6) {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&address->addr);
    same = std::memcmp(&sin6->sin6_addr, pinned->bytes.data(), 16) == 0;
  }
  if (!same) {
    return CURL_SOCKET_BAD;
  }
  return socket(address->family, address->socktype, address->protocol);
}

bool Retryable(const Result<WebhookResponse>& result) {
  if (!result.ok()) {
    return result.status().IsIOError();
  }
  const int s = result->status;
  return s == 408 || s == 429 || s >= 500;
}

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

std::string JsonQuote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

Result<WebhookFormat> ParseWebhookFormat(std::string_view text) {
  const std::string lower = Lower(text);
  if (lower == "slack") return WebhookFormat::kSlack;
  if (lower == "google_chat" || lower == "googlechat" || lower == "google-chat") {
    return WebhookFormat::kGoogleChat;
  }
  if (lower == "custom") return WebhookFormat::kCustom;
  return Status::Invalid("unknown webhook format '", text,
                         "': expected slack, google_chat or custom");
}

const char* WebhookFormatName(WebhookFormat format) {
  switch (format) {
    case WebhookFormat::kSlack:
      return "slack";
    case WebhookFormat::kGoogleChat:
      return "google_chat";
    case WebhookFormat::kCustom:
      return "custom";
  }
  return "?";
}

Result<std::string> FormatWebhookBody(WebhookFormat format, std::string_view payload_json) {
  simdjson::dom::parser parser;
  RILL_ASSIGN_OR_RAISE(auto payload, ParseJson(parser, payload_json, "webhook payload"));
  if (format == WebhookFormat::kCustom) {
    return simdjson::to_string(payload);
  }
  std::string text;
  std::string_view as_string;
  if (!payload.get_string().get(as_string)) {
    text = std::string(as_string);
  } else if (auto t = StringMember(payload, "text")) {
    text = *t;
  } else if (auto m = StringMember(payload, "message")) {
    text = *m;
  } else {
    text = simdjson::to_string(payload);
  }
  if (format == WebhookFormat::kSlack) {
    return "{\"text\":" + JsonQuote(text) + "}";
  }
  const std::string title = StringMember(payload, "title").value_or("Rill alert");
  std::optional<std::string> subtitle = StringMember(payload, "subtitle");
  if (!subtitle) {
    subtitle = StringMember(payload, "severity");
  }
  std::string header = "{\"title\":" + JsonQuote(title);
  if (subtitle) {
    header += ",\"subtitle\":" + JsonQuote(*subtitle);
  }
  header += "}";
  return "{\"cardsV2\":[{\"cardId\":\"rill-alert\",\"card\":{\"header\":" + header +
         ",\"sections\":[{\"widgets\":[{\"textParagraph\":{\"text\":" + JsonQuote(text) +
         "}}]}]}}]}";
}

// The sender --------------------------------------------------------------

struct WebhookSender::Impl {
  struct Pending {
    WebhookDelivery delivery;
    std::string body;  // formatted once at Enqueue
    int attempts = 0;
  };

  mutable std::mutex mu;
  std::condition_variable cv;       // worker waits for work / its next due time
  std::condition_variable idle_cv;  // WaitIdle waits for an empty queue
  std::multimap<SteadyClock::time_point, Pending> queue;  // by due time
  bool in_flight = false;
  bool stop = false;
  WebhookStats stats;
  std::shared_ptr<FailureCallback> on_failure;
  std::thread worker;
};

WebhookSender::WebhookSender(WebhookOptions options)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {}

Result<std::unique_ptr<WebhookSender>> WebhookSender::Make(WebhookOptions options) {
  if (!(options.timeout_seconds > 0) || !std::isfinite(options.timeout_seconds)) {
    return Status::Invalid("webhook timeout_seconds must be positive");
  }
  if (options.max_attempts < 1) {
    return Status::Invalid("webhook max_attempts must be at least 1");
  }
  if (!(options.initial_backoff_seconds >= 0) || !(options.max_backoff_seconds >= 0)) {
    return Status::Invalid("webhook backoff must be non-negative");
  }
  if (options.queue_capacity < 1 || options.max_response_bytes < 0) {
    return Status::Invalid("webhook queue_capacity must be at least 1");
  }
  if (!options.resolver) {
    options.resolver = SystemResolve;
  }
  InitCurlOnce();
  std::unique_ptr<WebhookSender> sender(new WebhookSender(std::move(options)));
  sender->impl_->worker = std::thread([s = sender.get()] { s->WorkerLoop(); });
  return sender;
}

WebhookSender::~WebhookSender() { Stop(); }

void WebhookSender::Stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stop && !impl_->worker.joinable()) {
      return;
    }
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->worker.joinable() && impl_->worker.get_id() != std::this_thread::get_id()) {
    impl_->worker.join();
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->stats.dropped += static_cast<int64_t>(impl_->queue.size());
  impl_->queue.clear();
  impl_->stats.queued = 0;
  impl_->idle_cv.notify_all();
}

Result<WebhookResponse> WebhookSender::Send(const std::string& url, WebhookFormat format,
                                            std::string_view payload_json) {
  RILL_ASSIGN_OR_RAISE(std::string body, FormatWebhookBody(format, payload_json));
  return Post(url, body);
}

namespace {

/// POST `body` to `url`, connecting only to `pinned` (an address of `checked`).
/// `*connect_failed` is set when no connection could be made at all.
Result<WebhookResponse> PostPinned(const WebhookOptions& options, const CheckedUrl& checked,
                                   const IpAddress& pinned, std::string_view body,
                                   bool* connect_failed) {
  CurlRequest request;
  if (request.easy == nullptr) {
    return Status::OutOfMemory("curl_easy_init failed");
  }
  CURL* h = request.easy;
  std::string ip = pinned.ToString();
  if (pinned.v6) {
    ip.insert(ip.begin(), '[');
    ip.push_back(']');
  }
  // "::IP:PORT": whatever host and port curl derives from the URL, it connects
  // to the checked address; OpenPinnedSocket enforces the same.
  const std::string connect_to = "::" + ip + ":" + std::to_string(checked.port);
  request.connect_to = curl_slist_append(nullptr, connect_to.c_str());
  request.headers = curl_slist_append(nullptr, "Content-Type: application/json");
  request.headers = curl_slist_append(request.headers, "Expect:");
  ResponseSink sink;
  sink.limit = static_cast<size_t>(options.max_response_bytes);
  char error[CURL_ERROR_SIZE] = {};
  const auto timeout_ms = static_cast<long>(options.timeout_seconds * 1000);

  curl_easy_setopt(h, CURLOPT_URL, checked.url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_PROXY, "");  // ignore http_proxy & co.
  curl_easy_setopt(h, CURLOPT_CONNECT_TO, request.connect_to);
  curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, OpenPinnedSocket);
  curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, &pinned);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, request.headers);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "rill-webhook/1");
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);

  const CURLcode rc = curl_easy_perform(h);
  if (rc != CURLE_OK) {
    *connect_failed = rc == CURLE_COULDNT_CONNECT;
    return Status::IOError("webhook POST to ", checked.host, " (", pinned.ToString(), ":",
                           checked.port, ") failed: ",
                           error[0] != '\0' ? error : curl_easy_strerror(rc));
  }
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  return WebhookResponse{static_cast<int>(status), std::move(sink.body)};
}

}  // namespace

Result<WebhookResponse> WebhookSender::Post(const std::string& url, std::string_view body) {
  auto checked = CheckWebhookUrl(url, options_.allow_private, options_.resolver);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (!checked.ok() && checked.status().IsInvalid()) {
      ++impl_->stats.refused;
    } else if (checked.ok()) {
      ++impl_->stats.attempts;
    }
  }
  RILL_RETURN_NOT_OK(checked.status());
  // Every address passed the guard; try them in resolver order until one
  // accepts a connection (e.g. "localhost" resolving to ::1 and 127.0.0.1).
  Result<WebhookResponse> result = Status::IOError("no address");
  for (const IpAddress& address : checked->addresses) {
    bool connect_failed = false;
    result = PostPinned(options_, *checked, address, body, &connect_failed);
    if (!connect_failed) {
      break;
    }
  }
  return result;
}

Status WebhookSender::Enqueue(WebhookDelivery delivery) {
  RILL_ASSIGN_OR_RAISE(std::string body,
                       FormatWebhookBody(delivery.format, delivery.payload_json));
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stop) {
      return Status::Cancelled("webhook sender stopped");
    }
    if (static_cast<int64_t>(impl_->queue.size()) >= options_.queue_capacity) {
      ++impl_->stats.dropped;
      return Status::CapacityError("webhook queue is full (", options_.queue_capacity,
                                   " deliveries); dropped ", delivery.description);
    }
    impl_->queue.emplace(SteadyClock::now(), Impl::Pending{std::move(delivery), std::move(body)});
    impl_->stats.queued = static_cast<int64_t>(impl_->queue.size());
  }
  impl_->cv.notify_all();
  return Status::OK();
}

void WebhookSender::SetFailureCallback(FailureCallback callback) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->on_failure = std::make_shared<FailureCallback>(std::move(callback));
}

bool WebhookSender::WaitIdle(double timeout_seconds) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  return impl_->idle_cv.wait_for(
      lock, std::chrono::duration<double>(timeout_seconds),
      [&] { return impl_->queue.empty() && !impl_->in_flight; });
}

WebhookStats WebhookSender::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

void WebhookSender::WorkerLoop() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  while (!impl_->stop) {
    if (impl_->queue.empty()) {
      impl_->idle_cv.notify_all();
      impl_->cv.wait(lock, [&] { return impl_->stop || !impl_->queue.empty(); });
      continue;
    }
    auto first = impl_->queue.begin();
    if (first->first > SteadyClock::now()) {
      const auto due = first->first;  // a copy: the entry may be erased while waiting
      impl_->cv.wait_until(lock, due);
      continue;
    }
    Impl::Pending pending = std::move(first->second);
    impl_->queue.erase(first);
    impl_->in_flight = true;
    lock.unlock();

    ++pending.attempts;
    Result<WebhookResponse> result = Post(pending.delivery.url, pending.body);
    const bool delivered = result.ok() && result->status >= 200 && result->status < 300;
    const bool retry = !delivered && Retryable(result) && pending.attempts < options_.max_attempts;
    std::shared_ptr<FailureCallback> on_failure;
    WebhookFailure failure;
    if (!delivered && !retry) {
      failure.delivery = pending.delivery;
      failure.attempts = pending.attempts;
      failure.last_status = result.ok() ? result->status : 0;
      failure.error = result.ok() ? "receiver answered HTTP " + std::to_string(result->status)
                                  : result.status().message();
      Logger("server")->warn("webhook {} to {} failed after {} attempt(s): {}",
                             pending.delivery.description, pending.delivery.url,
                             pending.attempts, failure.error);
    }

    lock.lock();
    if (delivered) {
      ++impl_->stats.delivered;
    } else if (retry) {
      ++impl_->stats.retries;
      const double backoff = std::min(
          options_.max_backoff_seconds,
          options_.initial_backoff_seconds * std::pow(2.0, pending.attempts - 1));
      const auto due = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                                std::chrono::duration<double>(backoff));
      impl_->queue.emplace(due, std::move(pending));
    } else {
      ++impl_->stats.failed;
      on_failure = impl_->on_failure;
    }
    if (on_failure && *on_failure) {
      lock.unlock();
      (*on_failure)(failure);  // no lock held while calling out
      lock.lock();
    }
    impl_->in_flight = false;
    impl_->stats.queued = static_cast<int64_t>(impl_->queue.size());
    if (impl_->queue.empty()) {
      impl_->idle_cv.notify_all();
    }
  }
  impl_->idle_cv.notify_all();
}

// The route -----------------------------------------------------------------

namespace {

WebhookHttpReply ErrorReply(int status, std::string_view code, std::string_view message) {
  return {status, "{\"code\":" + JsonQuote(code) + ",\"message\":" + JsonQuote(message) + "}"};
}

}  // namespace

WebhookHttpReply HandleWebhookSend(std::string_view request_body, WebhookSender& sender) {
  simdjson::dom::parser parser;
  auto doc = ParseJson(parser, request_body, "request body");
  if (!doc.ok()) {
    return ErrorReply(400, "invalid", doc.status().message());
  }
  if (!doc->is_object()) {
    return ErrorReply(400, "invalid", "request body must be a JSON object");
  }
  std::optional<std::string> url = StringMember(*doc, "url");
  if (!url.has_value() || url->empty()) {
    return ErrorReply(400, "invalid", "url is required");
  }
  WebhookFormat format = WebhookFormat::kCustom;
  simdjson::dom::element format_value;
  if (!(*doc)["format"].get(format_value) && !format_value.is_null()) {
    std::optional<std::string> name = StringMember(*doc, "format");
    if (!name) {
      return ErrorReply(400, "invalid", "format must be a string");
    }
    auto parsed = ParseWebhookFormat(*name);
    if (!parsed.ok()) {
      return ErrorReply(400, "invalid", parsed.status().message());
    }
    format = *parsed;
  }
  std::string payload = "{}";
  simdjson::dom::element payload_value;
  if (!(*doc)["payload"].get(payload_value)) {
    payload = simdjson::to_string(payload_value);
  }
  auto response = sender.Send(*url, format, payload);
  if (!response.ok()) {
    if (response.status().IsInvalid()) {
      return ErrorReply(400, "invalid", response.status().message());
    }
    return ErrorReply(502, "webhook_unreachable", response.status().message());
  }
  const int remote = response->status;
  std::string body = response->body.substr(0, kReplyBodyLimit);
  const bool ok = remote >= 200 && remote < 300;
  const int status = (remote < 200 || remote > 599 || remote == 401 || remote == 407) ? 502 : remote;
  return {status, "{\"ok\":" + std::string(ok ? "true" : "false") +
                      ",\"status\":" + std::to_string(remote) + ",\"body\":" + JsonQuote(body) +
                      "}"};
}

}  // namespace rill::server
