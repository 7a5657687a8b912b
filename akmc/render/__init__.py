"""Renderers: pure functions from a list of diagnostics (and the sources) to text."""
