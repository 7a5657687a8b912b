#!/bin/sh
echo publishing
