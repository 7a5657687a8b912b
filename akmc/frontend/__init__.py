"""The front end's machinery behind `akmc.syntax`: tables derived from the grammar, the parse loop, syntax errors."""
