#!/bin/sh
# A notifier for akm-run (docs/runtime.md, "Notifications"): posts the notification's context to a
# webhook. The URL is a secret: it comes from the environment ($WEBHOOK_URL), never from a file in
# the repository. akm-run hands the context on stdin (and in the file $AKM_CONTEXT); the dispatch id
# stays the same when a notification is sent again after a crash, so the receiver can drop repeats.
#
#   akm-run run plans/workflows/release.plan.json --notify-cmd examples/notifiers/webhook.sh
set -eu
: "${WEBHOOK_URL:?set WEBHOOK_URL to the webhook to post to}"
exec curl --fail --silent --show-error --max-time 20 \
  --header 'Content-Type: application/json' \
  --header "Idempotency-Key: ${AKM_DISPATCH_ID}" \
  --data-binary @- \
  "$WEBHOOK_URL"
