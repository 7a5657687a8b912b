"""akmc: the compiler and checker of `.akm` workflows."""

__version__ = "0.1.0"

# Where the diagnostic pages are published; SARIF rules link to them (each rule also carries its
# whole page as `help`, so a viewer needs no network). The one place to change when it moves.
DOCS_URL = "https://example.invalid/akm/docs/diagnostics/{code}.md"
