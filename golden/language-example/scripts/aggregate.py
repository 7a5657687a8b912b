#!/usr/bin/env python3
import json
print(json.dumps({"verdict": "pass"}))
