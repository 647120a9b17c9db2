// Delivery of alert-rule webhooks.
//
// The metrics layer evaluates alert rules and knows nothing of HTTP. A
// RuleWebhookRelay listens to a MetricsStore's alerts; for each alert fired by
// a rule that has a webhook (AlertRule::webhook, ::webhook_format) it queues a
// delivery on a WebhookSender (own thread, timeout, retries, SSRF guard). A
// delivery that fails for good is recorded as an engine alert (severity
// error, component "webhook:<rule>").
//
// Threads: the listener runs on the store's collector thread and only queues
// (it never waits on the network). The store, the engine and the sender must
// outlive the relay; destroy the relay before them.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "rill/common/status.h"
#include "rill/metrics/alert_rule.h"
#include "rill/metrics/metrics_store.h"
#include "rill/server/webhook.h"

namespace rill {
class Engine;
}

namespace rill::server {

/// Return the JSON payload of a rule webhook:
/// {"text", "title", "severity", "rule", "metric", "operator", "threshold",
///  "value", "message", "server", "timestamp" (unix seconds), "time" (ISO 8601 UTC)}.
/// "text" is a one-line summary, so slack and google_chat formats read well.
std::string RuleWebhookPayload(const AlertRecord& alert, const AlertRule& rule,
                               std::string_view server_address);

class RuleWebhookRelay {
 public:
  /// Attach to `store` (required). `engine` (may be null) receives the
  /// failure alerts; without it they go through store->PushAlert. Sets the
  /// sender's failure callback.
  static Result<std::unique_ptr<RuleWebhookRelay>> Make(MetricsStore* store, Engine* engine,
                                                        WebhookSender* sender,
                                                        std::string server_address);
  /// Detach from the store and clear the sender's failure callback.
  ~RuleWebhookRelay();
  RuleWebhookRelay(const RuleWebhookRelay&) = delete;
  RuleWebhookRelay& operator=(const RuleWebhookRelay&) = delete;

  /// Set the address written into payloads (e.g. once the server bound its
  /// port). Any thread.
  void set_server_address(std::string address);
  /// Deliveries queued so far. Any thread.
  int64_t queued() const;

 private:
  RuleWebhookRelay(MetricsStore* store, Engine* engine, WebhookSender* sender,
                   std::string server_address);
  void OnAlert(const AlertRecord& alert);
  void OnFailure(const WebhookFailure& failure);

  /// Shared with the callbacks, which may still be running on the store's or
  /// the sender's thread while the relay is destroyed.
  struct Guard {
    std::mutex mu;
    RuleWebhookRelay* self = nullptr;  // null once the relay is gone
  };
  std::shared_ptr<Guard> guard_ = std::make_shared<Guard>();
  MetricsStore* store_;
  Engine* engine_;
  WebhookSender* sender_;
  uint64_t listener_id_ = 0;
  mutable std::mutex mu_;
  std::string server_address_;  // guarded by mu_
  int64_t queued_ = 0;          // guarded by mu_
};

}  // namespace rill::server
