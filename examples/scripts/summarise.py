#!/usr/bin/env python3
"""A unit in Python: read the context, do the work, print the result as JSON on stdout."""

import json
import os
import sys

context = json.load(sys.stdin)  # the same document is in the file named by $AKM_CONTEXT
greetings = context["inputs"]["steps.hello.output.greetings"]
count = context["inputs"]["steps.hello.output.count"]
# AKM_DISPATCH_ID stays the same when a crashed run is resumed: use it as the idempotency key
# of any side effect (a ticket, a release, a message) so that a repeated dispatch does no harm.
print(f"summarising {count} greetings (dispatch {os.environ['AKM_DISPATCH_ID']})", file=sys.stderr)
print(json.dumps({"lines": count, "text": "\n".join(greetings)}))
