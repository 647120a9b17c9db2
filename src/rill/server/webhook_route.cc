// POST /api/webhook/send over the server's WebhookSender (webhook.h).
#include "rill/server/webhook_route.h"

namespace rill::server {

HttpReply RelayWebhook(std::string_view body, WebhookSender* sender) {
  if (sender == nullptr) {
    return ErrorReply(503, "the webhook sender is not running");
  }
  WebhookHttpReply relayed = HandleWebhookSend(body, *sender);
  HttpReply reply;
  reply.status = relayed.status;
  reply.content_type = "application/json";
  reply.body = std::move(relayed.json);
  return reply;
}

}  // namespace rill::server
