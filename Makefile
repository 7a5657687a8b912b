# Shortcuts for `python3 tasks.py`, which needs nothing but Python 3.11+ (see README.md).
.PHONY: demo test
demo:
	python3 tasks.py demo
test:
	python3 tasks.py test
