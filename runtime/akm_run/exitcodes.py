"""The exit codes of `akm-run` (runtime.md, "Exit codes")."""

COMPLETED = 0
FAILED = 1
USAGE = 2  # a usage error or bad params
BLOCKED = 3  # the run needs a person
REFUSED = 4  # the plan was refused by verification
PREFLIGHT = 5  # preflight failed: nothing was published (or, on the pool, nothing dispatched)
INTERNAL = 70  # an internal error during a drive; the attempt is finished and the run resumable (EX_SOFTWARE)
LOCKED = 75  # another live driver holds the run's lock (EX_TEMPFAIL)
INTERRUPTED = 130  # interrupted or timed out; the run is resumable
