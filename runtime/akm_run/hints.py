"""The commands akm-run prints for a person to paste (notes, errors, `status`): each one names the
state directory unless it is the default, so it works as printed from any directory."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from akm_run.stateroot import default_state_dir


@dataclass(frozen=True, slots=True)
class Hints:
    """Builds `akm-run VERB ARGS [--state-dir DIR | --database URL]`; `state_dir` is None for the
    default one, `database` None unless a command line named a shared store other than the default."""

    state_dir: str | None = None
    database: str | None = None  # as printed: never with a password (database_url.shown)

    @classmethod
    def of(cls, state_dir: Path) -> Hints:
        """Hints for a state directory: the default one (what a bare command resolves in this
        environment: $AKM_STATE_DIR, else the one found from the current directory) is left out,
        any other is given absolute."""
        if state_dir.absolute() == default_state_dir().absolute():
            return cls(None)
        return cls(str(state_dir.absolute()))

    def __call__(self, verb: str, *args: str) -> str:
        words = ["akm-run", verb, *args] + (["--state-dir", self.state_dir] if self.state_dir else [])
        words += ["--database", self.database] if self.database else []
        return " ".join(shlex.quote(w) for w in words)
