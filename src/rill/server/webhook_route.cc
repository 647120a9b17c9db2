// Placeholder until the webhook sender (webhook.h, another branch) is merged:
// the lead replaces this body with a call to WebhookSender.
#include "rill/server/webhook_route.h"

namespace rill::server {

HttpReply HandleWebhookSend(std::string_view /*body*/, bool /*allow_private_webhooks*/) {
  return ErrorReply(501, "webhook relay is not implemented in this build");
}

}  // namespace rill::server
