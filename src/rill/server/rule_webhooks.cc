#include "rill/server/rule_webhooks.h"

#include <cmath>
#include <ctime>

#include <fmt/format.h>

#include "rill/common/logging.h"
#include "rill/engine/engine.h"

namespace rill::server {
namespace {

std::string JsonNumber(double v) {
  return std::isfinite(v) ? fmt::format("{}", v) : "null";
}

std::string IsoTime(double ts) {
  const auto seconds = static_cast<std::time_t>(std::floor(ts));
  std::tm tm = {};
  gmtime_r(&seconds, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  const int millis = static_cast<int>((ts - std::floor(ts)) * 1000);
  return fmt::format("{}.{:03d}Z", buf, millis);
}

}  // namespace

std::string RuleWebhookPayload(const AlertRecord& alert, const AlertRule& rule,
                               std::string_view server_address) {
  const double value = alert.value.value_or(NAN);
  const double threshold = alert.threshold.value_or(rule.threshold);
  const std::string text =
      fmt::format("[{}] Rill alert rule '{}': {} = {} {} {} — {}", SeverityName(alert.severity),
                  rule.name, rule.metric, JsonNumber(value), CompareOpName(rule.op),
                  JsonNumber(threshold), alert.message);
  std::string out = "{";
  out += "\"text\":" + JsonQuote(text);
  out += ",\"title\":" + JsonQuote("Rill alert rule '" + rule.name + "' fired");
  out += ",\"severity\":" + JsonQuote(SeverityName(alert.severity));
  out += ",\"rule\":" + JsonQuote(rule.name);
  out += ",\"metric\":" + JsonQuote(rule.metric);
  out += ",\"operator\":" + JsonQuote(CompareOpName(rule.op));
  out += ",\"threshold\":" + JsonNumber(threshold);
  out += ",\"value\":" + JsonNumber(value);
  out += ",\"message\":" + JsonQuote(alert.message);
  out += ",\"server\":" + JsonQuote(server_address);
  out += ",\"timestamp\":" + JsonNumber(alert.ts);
  out += ",\"time\":" + JsonQuote(IsoTime(alert.ts));
  out += "}";
  return out;
}

RuleWebhookRelay::RuleWebhookRelay(MetricsStore* store, Engine* engine, WebhookSender* sender,
                                   std::string server_address)
    : store_(store), engine_(engine), sender_(sender),
      server_address_(std::move(server_address)) {}

Result<std::unique_ptr<RuleWebhookRelay>> RuleWebhookRelay::Make(MetricsStore* store,
                                                                 Engine* engine,
                                                                 WebhookSender* sender,
                                                                 std::string server_address) {
  if (store == nullptr || sender == nullptr) {
    return Status::Invalid("RuleWebhookRelay needs a metrics store and a webhook sender");
  }
  std::unique_ptr<RuleWebhookRelay> relay(
      new RuleWebhookRelay(store, engine, sender, std::move(server_address)));
  relay->guard_->self = relay.get();
  std::shared_ptr<Guard> guard = relay->guard_;
  sender->SetFailureCallback([guard](const WebhookFailure& f) {
    std::lock_guard<std::mutex> lock(guard->mu);
    if (guard->self != nullptr) guard->self->OnFailure(f);
  });
  relay->listener_id_ = store->AddAlertListener([guard](const AlertRecord& a) {
    std::lock_guard<std::mutex> lock(guard->mu);
    if (guard->self != nullptr) guard->self->OnAlert(a);
  });
  return relay;
}

RuleWebhookRelay::~RuleWebhookRelay() {
  store_->RemoveAlertListener(listener_id_);
  sender_->SetFailureCallback(nullptr);
  std::lock_guard<std::mutex> lock(guard_->mu);  // waits for a callback in progress
  guard_->self = nullptr;
}

void RuleWebhookRelay::set_server_address(std::string address) {
  std::lock_guard<std::mutex> lock(mu_);
  server_address_ = std::move(address);
}

int64_t RuleWebhookRelay::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_;
}

void RuleWebhookRelay::OnAlert(const AlertRecord& alert) {
  if (alert.source != EventSource::kRule || alert.rule.empty()) {
    return;
  }
  // The alert carries the rule's name; its webhook is looked up now (the
  // listener runs without the store's lock, so this call is allowed).
  std::optional<AlertRule> rule;
  for (AlertRuleInfo& info : store_->AlertRules()) {
    if (info.rule.name == alert.rule) {
      rule = std::move(info.rule);
      break;
    }
  }
  if (!rule || !rule->webhook || rule->webhook->empty()) {
    return;
  }
  auto format = ParseWebhookFormat(rule->webhook_format);
  std::string address;
  {
    std::lock_guard<std::mutex> lock(mu_);
    address = server_address_;
  }
  WebhookDelivery delivery;
  delivery.url = *rule->webhook;
  delivery.format = format.ok() ? *format : WebhookFormat::kCustom;
  delivery.payload_json = RuleWebhookPayload(alert, *rule, address);
  delivery.description = "alert rule '" + rule->name + "'";
  Status st = sender_->Enqueue(std::move(delivery));
  if (!st.ok()) {
    WebhookFailure failure;
    failure.delivery.url = *rule->webhook;
    failure.delivery.description = "alert rule '" + rule->name + "'";
    failure.error = st.message();
    OnFailure(failure);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++queued_;
}

void RuleWebhookRelay::OnFailure(const WebhookFailure& failure) {
  EngineEvent event;
  event.severity = Severity::kError;
  event.source = EventSource::kEngine;
  const std::string& what = failure.delivery.description;
  const std::string rule = what.size() > 13 && what.rfind("alert rule '", 0) == 0
                               ? what.substr(12, what.size() - 13)
                               : what;
  event.component = "webhook:" + rule;
  event.message = "webhook of " + what + " failed";
  event.detail = fmt::format("POST {} failed after {} attempt(s): {}", failure.delivery.url,
                             failure.attempts, failure.error);
  if (engine_ != nullptr) {
    event.ts = engine_->Now();
    engine_->RecordEvent(std::move(event));
  } else {
    (void)store_->PushAlert(event.message, "error", event.detail);
  }
}

}  // namespace rill::server
