"""The language server (`akmc lsp`): the checker's diagnostics, hover, definitions, completion,
outline, formatting and fixes for editors, over the Language Server Protocol."""
