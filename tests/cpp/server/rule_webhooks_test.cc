// Alert rules with a webhook deliver it when they fire; failures become alerts.
#include "rill/server/rule_webhooks.h"

#include <string>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/engine/engine.h"
#include "server/webhook_test_receiver.h"

namespace rill::server {
namespace {

using rill::testing::TestReceiver;

struct Fixture {
  std::unique_ptr<Engine> engine = Engine::Make().ValueOrDie();
  std::unique_ptr<MetricsStore> store;
  std::unique_ptr<WebhookSender> sender;
  std::unique_ptr<RuleWebhookRelay> relay;

  Fixture() {
    MetricsOptions mo;
    mo.path = ":memory:";
    store = MetricsStore::Make(engine.get(), mo).ValueOrDie();
    WebhookOptions wo;
    wo.allow_private = true;
    wo.max_attempts = 1;
    sender = WebhookSender::Make(wo).ValueOrDie();
    relay = RuleWebhookRelay::Make(store.get(), engine.get(), sender.get(), "127.0.0.1:9494")
                .ValueOrDie();
    EXPECT_TRUE(store->AddKpiQuery("orders_per_s", "SELECT 125.5 AS v", 0.01).ok());
  }
  ~Fixture() {
    relay.reset();
    store->Stop();
  }
};

TEST(RuleWebhookPayload, CarriesTheRuleTheValueAndTheServer) {
  AlertRule rule;
  rule.name = "busy";
  rule.metric = "orders_per_s";
  rule.op = CompareOp::kGreaterEqual;
  rule.threshold = 100;
  AlertRecord alert;
  alert.ts = 1700000000.25;
  alert.severity = Severity::kWarning;
  alert.source = EventSource::kRule;
  alert.message = "too busy";
  alert.rule = "busy";
  alert.value = 125.5;
  alert.threshold = 100;
  EXPECT_EQ(RuleWebhookPayload(alert, rule, "127.0.0.1:9494"),
            R"({"text":"[warning] Rill alert rule 'busy': orders_per_s = 125.5 >= 100 — too busy",)"
            R"("title":"Rill alert rule 'busy' fired","severity":"warning","rule":"busy",)"
            R"("metric":"orders_per_s","operator":">=","threshold":100,"value":125.5,)"
            R"("message":"too busy","server":"127.0.0.1:9494","timestamp":1700000000.25,)"
            R"("time":"2023-11-14T22:13:20.250Z"})");
}

TEST(RuleWebhookRelay, DeliversAFiringRulesWebhookInItsFormat) {
  TestReceiver receiver;
  Fixture f;
  AlertRule rule;
  rule.name = "busy";
  rule.metric = "orders_per_s";
  rule.op = CompareOp::kGreater;
  rule.threshold = 100;
  rule.webhook = receiver.url("/slack");
  rule.webhook_format = "slack";
  ASSERT_TRUE(f.store->AddAlertRule(rule).ok());
  AlertRule quiet = rule;  // never fires: no webhook call
  quiet.name = "quiet";
  quiet.threshold = 1000;
  ASSERT_TRUE(f.store->AddAlertRule(quiet).ok());
  AlertRule no_hook = rule;  // fires, but has no webhook
  no_hook.name = "no_hook";
  no_hook.webhook.reset();
  ASSERT_TRUE(f.store->AddAlertRule(no_hook).ok());

  ASSERT_TRUE(f.store->Flush().ok());  // runs the KPI
  ASSERT_TRUE(f.store->Flush().ok());  // the rules see its value and fire
  ASSERT_TRUE(f.sender->WaitIdle(10));
  auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].target, "/slack");
  EXPECT_EQ(requests[0].body.rfind(R"({"text":"[warning] Rill alert rule 'busy': orders_per_s = 125.5 > 100)", 0), 0u)
      << requests[0].body;
  EXPECT_EQ(f.relay->queued(), 1);
}

TEST(RuleWebhookRelay, RecordsAFailedDeliveryAsAnAlert) {
  int port;
  {
    TestReceiver closed;
    port = closed.port();
  }
  Fixture f;
  AlertRule rule;
  rule.name = "busy";
  rule.metric = "orders_per_s";
  rule.op = CompareOp::kGreater;
  rule.threshold = 100;
  rule.webhook = "http://127.0.0.1:" + std::to_string(port) + "/gone";
  ASSERT_TRUE(f.store->AddAlertRule(rule).ok());
  ASSERT_TRUE(f.store->Flush().ok());
  ASSERT_TRUE(f.store->Flush().ok());
  ASSERT_TRUE(f.sender->WaitIdle(10));
  ASSERT_TRUE(f.store->Flush().ok());  // writes the failure alert
  auto alerts = f.store
                    ->QueryMetrics("SELECT severity, source, message, detail FROM rill_alerts "
                                   "WHERE component = 'webhook:busy'")
                    .ValueOrDie();
  ASSERT_EQ(alerts->num_rows(), 1);
  EXPECT_EQ((*alerts->GetColumnByName("severity")->GetScalar(0))->ToString(), "error");
  EXPECT_EQ((*alerts->GetColumnByName("message")->GetScalar(0))->ToString(),
            "webhook of alert rule 'busy' failed");
  EXPECT_NE((*alerts->GetColumnByName("detail")->GetScalar(0))->ToString().find("/gone"),
            std::string::npos);
}

TEST(RuleWebhookRelay, WebhookFormatIsPersistedWithTheRule) {
  Fixture f;
  AlertRule rule;
  rule.name = "r";
  rule.metric = "m";
  rule.webhook = "https://chat.example/hook";
  rule.webhook_format = "google_chat";
  ASSERT_TRUE(f.store->AddAlertRule(rule).ok());
  rule.webhook_format = "teams";
  EXPECT_TRUE(f.store->AddAlertRule(rule).IsInvalid());
  ASSERT_TRUE(f.store->Flush().ok());
  auto rows = f.store->QueryMetrics("SELECT webhook, webhook_format FROM rill_alert_rules")
                  .ValueOrDie();
  ASSERT_EQ(rows->num_rows(), 1);
  EXPECT_EQ((*rows->column(0)->GetScalar(0))->ToString(), "https://chat.example/hook");
  EXPECT_EQ((*rows->column(1)->GetScalar(0))->ToString(), "google_chat");
}

}  // namespace
}  // namespace rill::server
