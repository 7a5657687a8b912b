"""The exit codes of `akmc`, in one place."""

OK = 0  # clean (warnings allowed unless --strict), plans equal, verification passed
FINDINGS = 1  # diagnostics with errors, stale plans, or plans that differ
USAGE = 2  # usage error, unreadable input, or an internal error
REFUSED = 4  # plan refused by verification
INTERRUPTED = 130  # `akmc check` stopped by SIGINT (Ctrl-C): 128 + the signal, as a shell reports it
BROKEN_PIPE = 141  # `akmc check` whose reader closed the pipe (`| head`): 128 + SIGPIPE
