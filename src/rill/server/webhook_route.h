// POST /api/webhook/send: relay a notification to Slack, Google Chat or a
// custom endpoint (the seed's dashboard server route). The body is
// {"url": "...", "format": "slack"|"google_chat"|"custom", "payload": {...}};
// the reply passes the remote status back. The SSRF guard of webhook.h
// applies (allow_private_webhooks lifts it).
#pragma once

#include <string_view>

#include "rill/server/http_types.h"
#include "rill/server/webhook.h"

namespace rill::server {

/// Handle one webhook relay request with the server's sender (a worker
/// thread; may block up to the sender's timeout). 503 without a sender.
HttpReply RelayWebhook(std::string_view body, WebhookSender* sender);

}  // namespace rill::server
