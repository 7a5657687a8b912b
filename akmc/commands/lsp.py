"""`akmc lsp`: run the language server over stdio (the `lsp` extra brings pygls)."""

from __future__ import annotations

import sys

from akmc import exitcodes


def run() -> int:
    try:
        from akmc.lsp.server import main  # late, in `try`: pygls comes with the `lsp` extra, maybe absent
    except ImportError as error:
        print(
            f"akmc: error: `akmc lsp` needs the language server extra ({error.name or error} is missing); "
            "install it with: pip install 'akmc[lsp]'",
            file=sys.stderr,
        )
        return exitcodes.USAGE
    main()
    return exitcodes.OK
