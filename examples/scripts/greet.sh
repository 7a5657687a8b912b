#!/bin/sh
# Reads the unit context on stdin and prints one greeting as a JSON string.
python3 -c 'import json, sys; c = json.load(sys.stdin); print(json.dumps("hello, " + c["item"]))'
