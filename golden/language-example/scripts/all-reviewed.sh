#!/bin/sh
set -eu
echo "{}"
