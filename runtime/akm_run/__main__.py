"""`python -m akm_run` is the `akm-run` command."""

import sys

from akm_run.cli import main

if __name__ == "__main__":
    sys.exit(main())
