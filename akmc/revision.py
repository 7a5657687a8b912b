"""A workspace as it was at a git revision, read from git's object store (`akmc diff --rev`).

Nothing is checked out: the working tree, the index and HEAD are never touched. The workspace's
files at the revision are streamed with `git ls-tree` and `git cat-file --batch` into a private
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
    base = into if prefix == "." else into / prefix
    base.mkdir(parents=True, exist_ok=True)
    _write_blobs(top, [(mode, oid, into / path) for mode, oid, path in entries])
    return base


def _write_blobs(top: Path, entries: list[tuple[bytes, bytes, Path]]) -> None:
    """Stream each object's content from one `git cat-file --batch` into its file, one object at a time
    (never the whole revision in memory)."""
    try:
        batch = subprocess.Popen(["git", "cat-file", "--batch"], cwd=top, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    except OSError as error:
        raise RevisionError(f"cannot run git: {error.strerror}") from error
    assert batch.stdin is not None and batch.stdout is not None
    try:
        for mode, oid, target in entries:
            batch.stdin.write(oid + b"\n")
            batch.stdin.flush()
            header = batch.stdout.readline().split()
            if len(header) != 3 or header[1] != b"blob":
                raise RevisionError(f"git cat-file could not read {oid.decode()} ({target.name})")
            left = int(header[2])
            target.parent.mkdir(parents=True, exist_ok=True)
            if mode == SYMLINK:
                os.symlink(os.fsdecode(batch.stdout.read(left)), target)
            else:
                with target.open("wb") as out:
                    while left:
                        chunk = batch.stdout.read(min(left, 1 << 20))
                        if not chunk:
                            raise RevisionError(f"git cat-file stopped while reading {oid.decode()}")
                        out.write(chunk)
                        left -= len(chunk)
            batch.stdout.read(1)  # the newline after each object
    finally:
        batch.stdin.close()
        batch.stdout.close()
        batch.wait()
