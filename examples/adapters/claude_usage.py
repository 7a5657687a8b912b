#!/usr/bin/env python3
"""An agent adapter: runs `claude -p --output-format json` on the unit's instructions, reports its
usage on AKM_PROGRESS (so `max_tokens` can bind) and prints the agent's answer as the unit's output.

Use it as the agent command: `akm-run run PLAN --agent-cmd "python3 adapters/claude_usage.py"`."""

import json
import os
import subprocess
import sys

instructions = sys.stdin.read()
budget = os.environ.get("AKM_MAX_TOKENS")  # what is left of every budget over this unit, if any
if budget is not None:
    instructions += f"\n\n(Token budget for this task: {budget} tokens. Be brief.)"
done = subprocess.run(["claude", "-p", "--output-format", "json"], input=instructions, capture_output=True, text=True)
sys.stderr.write(done.stderr)
try:
    result = json.loads(done.stdout)
except ValueError:
    sys.exit(f"claude printed no JSON result (exit {done.returncode})")
usage = result.get("usage") or {}
cached = usage.get("cache_creation_input_tokens", 0) + usage.get("cache_read_input_tokens", 0)
report = {
    "input_tokens": usage.get("input_tokens", 0) + cached,  # cached input is read all the same
    "output_tokens": usage.get("output_tokens", 0),
    "cached_input_tokens": cached,
    "cost_usd": result.get("total_cost_usd"),  # stored and shown, never budgeted
}
with open(os.environ["AKM_PROGRESS"], "a", encoding="utf-8") as progress:
    progress.write(json.dumps({"usage": report}) + "\n")
if done.returncode != 0 or result.get("is_error"):
    sys.exit(f"claude failed: {result.get('result', '')[:200]}")
print(json.dumps(result.get("result", "")))
