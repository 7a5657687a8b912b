"""A workspace as it was at a git revision, read from git's object store (`akmc diff --rev`).

Nothing is checked out: the working tree, the index and HEAD are never touched. The workspace's
files at the revision are read with `git ls-tree` and `git cat-file --batch` into a private
temporary directory that the caller removes, so the compiler reads them exactly as it reads the
working tree (same containment and symlink rules). `export-ignore` and `export-subst` attributes do
not apply: what is compiled is what was committed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path, PurePosixPath

SYMLINK, SUBMODULE = b"120000", b"160000"


class RevisionError(Exception):
    """The revision cannot be read: not a git repository, an unknown revision, git missing."""


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, check=False)
    except OSError as error:
        raise RevisionError(f"cannot run git: {error.strerror}") from error
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RevisionError(message[-1] if message else f"git {args[0]} failed")
    return done.stdout


def resolve(root: Path, revision: str) -> str:
    """The commit id a revision names, or RevisionError."""
    if revision.startswith("-"):
        raise RevisionError(f"{revision!r} is not a revision")
    try:
        return (
            _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}")
            .decode()
            .strip()
        )
    except RevisionError:
        raise RevisionError(f"{revision!r} does not name a commit in the repository at {root}") from None


def materialise(root: Path, revision: str, into: Path) -> Path:
    """Write the files under `root` as they were at `revision` into `into`; return the workspace root there."""
    commit = resolve(root, revision)
    top = Path(_git(root, "rev-parse", "--show-toplevel").decode().strip()).resolve()
    prefix = root.resolve().relative_to(top).as_posix()
    spec = [] if prefix == "." else ["--", prefix + "/"]
    listing = _git(top, "ls-tree", "-r", "-z", "--full-tree", commit, *spec)
    entries = []
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, raw = record.partition(b"\t")
        mode, kind, oid = meta.split(b" ")
        if mode != SUBMODULE and kind == b"blob":
            entries.append((mode, oid, PurePosixPath(os.fsdecode(raw))))
    blobs = _blobs(top, [oid for _, oid, _ in entries])
    base = into if prefix == "." else into / prefix
    base.mkdir(parents=True, exist_ok=True)
    for mode, oid, path in entries:
        target = into / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == SYMLINK:
            os.symlink(os.fsdecode(blobs[oid]), target)
        else:
            target.write_bytes(blobs[oid])
    return base


def _blobs(top: Path, oids: list[bytes]) -> dict[bytes, bytes]:
    """Every object's content, read in one `git cat-file --batch`."""
    wanted = list(dict.fromkeys(oids))
    out = _git(top, "cat-file", "--batch", stdin=b"".join(oid + b"\n" for oid in wanted))
    found: dict[bytes, bytes] = {}
    at = 0
    for oid in wanted:
        end = out.index(b"\n", at)
        header = out[at:end].split(b" ")
        if len(header) != 3:
            raise RevisionError(f"git cat-file could not read {oid.decode()}")
        size = int(header[2])
        found[oid] = out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1
    return found
