#!/bin/sh
echo '{"files": ["a"], "total": 1}'
