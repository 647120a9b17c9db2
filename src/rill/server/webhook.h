// Outbound webhooks: the relay behind `POST /api/webhook/send` and the
// delivery of alert-rule webhooks.
//
// A WebhookSender POSTs JSON with libcurl. Every URL passes the SSRF guard
// (ssrf_guard.h) first; the connection is pinned to the checked address and
// redirects are never followed (a 3xx is reported as the remote status).
//
//   Send()     synchronous, one attempt: the route handler uses it and passes
//              the remote status back to its caller.
//   Enqueue()  asynchronous: a bounded queue served by the sender's own worker
//              thread ("rill-webhooks"); each delivery gets up to
//              `max_attempts` attempts with exponential backoff (retried on
//              connection errors, timeouts, 408, 429 and 5xx; never on a
//              refused URL or another 4xx). A delivery that finally fails is
//              handed to the failure callback (the server records it as an
//              alert). A full queue refuses new deliveries (CapacityError)
//              and counts them.
//
// Message formats (WebhookFormat):
//   slack        {"text": TEXT}
//   google_chat  a Google Chat card: {"cardsV2": [{"cardId": "rill-alert",
//                "card": {"header": {"title": TITLE, "subtitle": SUBTITLE},
//                "sections": [{"widgets": [{"textParagraph": {"text": TEXT}}]}]}}]}
//   custom       the payload, unchanged
// where, for a payload that is an object, TEXT is its "text" (else its
// "message", else the whole payload as JSON), TITLE its "title" (else
// "Rill alert") and SUBTITLE its "subtitle" (else its "severity", else
// omitted); a payload that is a string is the TEXT itself.
//
// Threads: every method may be called from any thread. The failure callback
// runs on the worker thread and must not call Stop() or destroy the sender.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "rill/common/status.h"
#include "rill/server/ssrf_guard.h"

namespace rill::server {

/// How the payload is wrapped for the receiver.
enum class WebhookFormat { kSlack, kGoogleChat, kCustom };

/// Parse "slack", "google_chat" (alias "googlechat", "google-chat") or
/// "custom" (case-insensitive). Invalid otherwise, listing the accepted names.
Result<WebhookFormat> ParseWebhookFormat(std::string_view text);
/// Return "slack", "google_chat" or "custom".
const char* WebhookFormatName(WebhookFormat format);

/// Return the JSON body to POST for `payload_json` (any JSON value) in
/// `format` (see the file comment). Invalid when `payload_json` is not JSON.
Result<std::string> FormatWebhookBody(WebhookFormat format, std::string_view payload_json);

/// Return `text` as a JSON string literal (quotes included).
std::string JsonQuote(std::string_view text);

struct WebhookOptions {
  /// Lift the SSRF guard for loopback / private / link-local receivers.
  bool allow_private = false;
  /// Whole-request timeout of one attempt (connect included).
  double timeout_seconds = 5.0;
  /// Attempts per queued delivery (1 = no retry).
  int max_attempts = 3;
  /// Delay before the second attempt; doubled for each further attempt.
  double initial_backoff_seconds = 0.5;
  double max_backoff_seconds = 10.0;
  /// Deliveries waiting in the queue (retries included); beyond this Enqueue
  /// refuses.
  int64_t queue_capacity = 1000;
  /// Response bodies are kept up to this many bytes (the rest is discarded).
  int64_t max_response_bytes = 64 * 1024;
  /// Name resolution (tests inject one); the system resolver by default.
  Resolver resolver = SystemResolve;
};

/// What the receiver answered.
struct WebhookResponse {
  int status = 0;    ///< HTTP status of the receiver
  std::string body;  ///< at most max_response_bytes
};

/// One asynchronous delivery.
struct WebhookDelivery {
  std::string url;
  WebhookFormat format = WebhookFormat::kCustom;
  /// The payload as JSON (formatted per `format` when sent).
  std::string payload_json;
  /// What the delivery is for, in failure reports (e.g. "alert rule 'cpu'").
  std::string description;
};

/// A delivery that failed for good.
struct WebhookFailure {
  WebhookDelivery delivery;
  int attempts = 0;
  int last_status = 0;  ///< the last HTTP status; 0 when none was received
  std::string error;    ///< why the last attempt failed
};

/// Counters of a WebhookSender. Monotonic except `queued`.
struct WebhookStats {
  int64_t attempts = 0;   ///< HTTP attempts made (sync and async)
  int64_t delivered = 0;  ///< async deliveries that got a 2xx
  int64_t failed = 0;     ///< async deliveries given up (failure callback called)
  int64_t retries = 0;    ///< attempts after the first
  int64_t refused = 0;    ///< URLs refused by the SSRF guard (sync and async)
  int64_t dropped = 0;    ///< refused by the full queue or abandoned by Stop
  int64_t queued = 0;     ///< waiting now
};

class WebhookSender {
 public:
  using FailureCallback = std::function<void(const WebhookFailure&)>;

  /// Create a sender and start its worker thread. Invalid for bad options.
  static Result<std::unique_ptr<WebhookSender>> Make(WebhookOptions options = {});
  /// Stop() and join the worker.
  ~WebhookSender();
  WebhookSender(const WebhookSender&) = delete;
  WebhookSender& operator=(const WebhookSender&) = delete;

  const WebhookOptions& options() const { return options_; }

  /// Format `payload_json` and POST it to `url` once, on the calling thread.
  /// Return the receiver's answer whatever its status. Invalid when the URL is
  /// refused or the payload is not JSON; IOError when the host does not
  /// resolve, the connection fails or the timeout passes.
  Result<WebhookResponse> Send(const std::string& url, WebhookFormat format,
                               std::string_view payload_json);
  /// POST `body` (already formatted JSON) to `url` once; errors as Send.
  Result<WebhookResponse> Post(const std::string& url, std::string_view body);

  /// Queue a delivery for the worker. Invalid for a payload that is not JSON;
  /// CapacityError when the queue is full; Cancelled after Stop().
  Status Enqueue(WebhookDelivery delivery);
  /// Set the function called with each delivery that failed for good.
  void SetFailureCallback(FailureCallback callback);

  /// Finish the attempt in flight, drop what is queued (counted in
  /// stats().dropped) and join the worker. Safe to call twice.
  void Stop();
  /// Wait until nothing is queued or in flight; false on timeout. For tests
  /// and orderly shutdown.
  bool WaitIdle(double timeout_seconds);

  WebhookStats stats() const;

 private:
  struct Impl;
  explicit WebhookSender(WebhookOptions options);
  void WorkerLoop();

  WebhookOptions options_;
  std::unique_ptr<Impl> impl_;
};

/// The reply of HandleWebhookSend, to be sent as `application/json`.
struct WebhookHttpReply {
  int status = 200;
  std::string json;
};

/// Handle `POST /api/webhook/send` with JSON body
/// `{"url": ..., "format": "slack"|"google_chat"|"custom", "payload": ...}`
/// (format defaults to "custom"; payload to {}) by one synchronous Send:
///   - a body that is not a JSON object, a missing or empty `url`, an unknown
///     format: 400 `{"code": "invalid", "message": ...}`;
///   - a URL refused by the SSRF guard: 400, the message says why;
///   - the receiver could not be reached (DNS, connect, timeout): 502
///     `{"code": "webhook_unreachable", "message": ...}`;
///   - otherwise the receiver's status is passed back as the reply's status
///     (except 401 and 407, which would read as our own authentication
///     failure: those become 502) with `{"ok": 2xx?, "status": <remote
///     status>, "body": <the receiver's answer, at most 4 KiB>}`.
/// Runs on the calling thread (a server worker thread; it blocks up to the
/// sender's timeout).
WebhookHttpReply HandleWebhookSend(std::string_view request_body, WebhookSender& sender);

}  // namespace rill::server
