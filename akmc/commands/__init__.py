"""One module per `akmc` command; each exposes a function that returns an exit code."""
