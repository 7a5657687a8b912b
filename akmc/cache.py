"""The result cache of `akmc check` under `<root>/.akmc-cache/`.

An entry holds one file's diagnostics and the hash of every workspace file its result depends on:
its source, the scripts and prompts it reads, every child it composes (transitively) and the files
those read, and the paths it found absent. An entry is used only when its key (the compiler's
fingerprint, the file, the suppression setting, the workspace's `akm.toml`) matches, its own file's
hash is among those it records, every one of those hashes still matches, and its keyed hash
(HMAC-SHA256) verifies under this user's cache key, kept outside the workspace: an entry planted in
the workspace, restored from another machine or edited is never believed, whatever hashes it claims
(the keyed hash is the entry's last field, taken over the bytes before it, so checking it decodes nothing).
Anything else — stale, corrupt, huge, not a regular file, from another compiler — is ignored and
rewritten. Entries are written to a temporary file and renamed, so concurrent `akmc` processes never
see half an entry. Without a usable key (no writable home) nothing is cached.

Beside each entry, a record of the file's interface (`akmc.interfaces`: what a parent's check reads
of it) is kept, keyed, sealed and checked the same way, followed by its plan's bytes, which are
believed only when they have the hash the record names: a parent re-checked for one edited child
reads its other children's interfaces, neither their sources nor their diagnostics. A parent's plan
embeds its children's, so it stays out of the entry every check reads."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from akm_run.atomic import write_atomically
from akm_run.digest import tagged_sha256
from akmc import __version__
from akmc.diagnostics import CATALOG, Diagnostic, Related
from akmc.render.text import shown_lines
from akmc.sources import SourceFile
from akmc.spans import Span
from akmc.workspace import display_path, read_regular, relative_to, uses_refs

if TYPE_CHECKING:
    from akmc.compose import Child

DIRECTORY = ".akmc-cache"
FORMAT = 1
INTERFACE_SUFFIX = ".interface"  # beside an entry: the file's interface (`akmc.interfaces`), sealed the same way
MAX_ENTRY_BYTES = 8 * 1024 * 1024  # an entry past this is not read (diagnostics of one file are far smaller)
MAX_INDEX_BYTES = 256 * 1024 * 1024  # the `uses` index of a very large workspace stays far below this


@lru_cache(maxsize=1)
def secret() -> bytes | None:
    """This user's cache key: 32 random bytes under `$XDG_CACHE_HOME/akmc/` (else `~/.cache/akmc/`),
    made on first use; None when it cannot be made or is not this user's private file."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    try:
        directory = Path(base if os.path.isabs(base) else Path.home() / ".cache") / "akmc"
        path = directory / "cache-key"
        if not path.exists():
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            made = directory / f".cache-key.{os.getpid()}"
            write_atomically(made, os.urandom(32).hex(), mode=0o600)
            try:
                os.link(made, path)  # never replaces a key another process made meanwhile
            except FileExistsError:
                pass
            finally:
                made.unlink(missing_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        try:
            info = os.fstat(fd)
            private = stat.S_ISREG(info.st_mode) and not info.st_mode & 0o077
            key = bytes.fromhex(os.read(fd, 65).decode("ascii"))
        finally:
            os.close(fd)
    except (OSError, RuntimeError, ValueError):
        return None
    owned = not hasattr(os, "getuid") or info.st_uid == os.getuid()
    return key if private and owned and len(key) == 32 else None


_MAC = b',"mac":"'  # the last field of a stored entry: the HMAC-SHA256 of the entry's bytes before it


def sealed(key: bytes, entry: dict[str, Any]) -> bytes:
    """An entry as it is stored: its JSON, then, last, the keyed hash of those bytes."""
    body = json.dumps(entry, separators=(",", ":")).encode("ascii")  # ASCII: json escapes the rest
    return body[:-1] + _MAC + hmac.new(key, body, hashlib.sha256).hexdigest().encode("ascii") + b'"}'


def _opened(key: bytes, stored: bytes) -> Any:
    """The entry `stored` holds when its keyed hash is this key's over the bytes it follows (checked
    on the bytes read, before they are decoded); None otherwise."""
    head, found, tail = stored.rpartition(_MAC)
    if not found or len(tail) != 66 or not tail.endswith(b'"}'):
        return None
    expected = hmac.new(key, head + b"}", hashlib.sha256).hexdigest().encode("ascii")
    if not hmac.compare_digest(tail[:64], expected):
        return None  # not written by this user's akmc: planted, copied or edited
    return json.loads(stored)


@lru_cache(maxsize=1)
def fingerprint() -> str:
    """The compiler's version and the hash of its own code, grammar and catalog: a rebuilt compiler
    never trusts results of another."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256(f"akmc {__version__}\0".encode())
    for path in sorted([*package.rglob("*.py"), *package.parent.glob("grammar/*.lark"), *package.rglob("*.lark")]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


class Cached(NamedTuple):
    """One checked file as `akmc check` reports and caches it (restored, or fresh from a compile)."""

    source: SourceFile
    lines: dict[int, str]  # the source lines its diagnostics show (`render.text.shown_lines`), not the text
    diagnostics: list[Diagnostic]
    children: tuple[str, ...] = ()  # root-relative sources it composes, transitively
    uses: tuple[str, ...] = ()  # root-relative sources it composes directly
    deps: dict[str, str | None] | None = None  # set on a fresh result that may be cached
    child: Child | None = None  # a fresh result's interface: what a parent's check reads of it


class Cache:
    def __init__(self, root: Path, suppressions: bool) -> None:
        self.root = root.resolve()
        self._root = str(self.root)
        self.directory = self.root / DIRECTORY / f"v{FORMAT}"
        self.suppressions = suppressions
        self.key = secret() if _usable(self.root / DIRECTORY) else None
        self._hashes: dict[str, str | None] = {}
        self._bytes: dict[str, bytes] = {}
        self._loaded: dict[str, Cached | None] = {}
        self._entries: dict[str, dict[str, Any] | None] = {}  # each entry read: trusted and current, or None
        self._displays: dict[str, str] = {}
        self._last_display: tuple[str | None, str] = (None, "")  # the last diagnostic's file: display, relative
        self._paths: dict[str, Path] = {}  # each file's entry
        self.settings = self._hash("akm.toml")

    def relative(self, path: Path | str) -> str | None:
        """`path` relative to the root (lexically: the cache never follows a symlink to name a file)."""
        return relative_to(Path(os.path.abspath(path)), self.root)

    def _entry_path(self, relative: str) -> Path:
        found = self._paths.get(relative)
        if found is None:
            key = f"{fingerprint()}\0{relative}\0{self.suppressions}".encode("utf-8", "surrogateescape")
            found = self._paths[relative] = self.directory / f"{hashlib.sha256(key).hexdigest()[:40]}.json"
        return found

    def _hash(self, relative: str) -> str | None:
        if relative not in self._hashes:
            try:
                with open(os.path.join(self._root, relative), "rb") as handle:
                    data = handle.read()
            except OSError:
                self._hashes[relative] = None
            else:
                if relative.endswith(".akm"):  # kept until its own entry is loaded, which takes its lines
                    self._bytes[relative] = data
                self._hashes[relative] = tagged_sha256(data)
        return self._hashes[relative]

    def load(self, relative: str) -> Cached | None:
        """The cached result of a file, or None when there is none that can be trusted."""
        if relative not in self._loaded:
            self._loaded[relative] = self._load(relative)
        return self._loaded[relative]

    def forget(self, relative: str) -> None:
        """The file's result was handed on: keep no record of it (a later `load` reads it again)."""
        self._loaded.pop(relative, None)
        self._bytes.pop(relative, None)
        self._entries.pop(relative, None)

    def interface(self, relative: str, file: str) -> Child | None:
        """What a parent's check reads of the file (`compose.Child`, naming it `file`), from its entry
        when that entry is trusted and current (as `load` needs it); None otherwise: the caller
        compiles the file."""
        from akmc import interfaces  # late: only a parent's check reads a child's interface

        try:
            stored = read_regular(self._entry_path(relative).with_suffix(INTERFACE_SUFFIX), MAX_ENTRY_BYTES)
        except OSError:
            return None
        # `[record,\nplan]`: the sealed record (no newline: JSON escapes them), then the plan's bytes
        if stored[:1] != b"[" or stored[-1:] != b"]" or len(stored) > MAX_ENTRY_BYTES:
            return None
        header, _, plan = stored[1:-1].partition(b",\n")
        record = self._trusted(relative, header, [*self._key(relative), "interface"])
        if record is None:
            return None
        try:
            return interfaces.decode(
                record["interface"], relative.removesuffix(".akm"), file, self._diagnostic, record["deps"], plan
            )
        except interfaces.MALFORMED:
            return None  # not the plan its hash names: compiled instead, never trusted

    def _key(self, relative: str) -> list[Any]:
        return [FORMAT, fingerprint(), relative, self.suppressions, self.settings]

    def _entry(self, relative: str) -> dict[str, Any] | None:
        """The file's entry, read once: None unless it is this user's, for this file as it is now."""
        if relative not in self._entries:
            self._entries[relative] = self._read(relative, self._entry_path(relative), self._key(relative))
        return self._entries[relative]

    def _read(self, relative: str, path: Path, key: list[Any]) -> dict[str, Any] | None:
        """The record stored at `path` for the file when it is this user's, under `key`, for the
        file as it is now (every hash it depends on matches); None otherwise."""
        try:
            stored = read_regular(path, MAX_ENTRY_BYTES)
        except OSError:
            return None  # missing, or not a regular file
        return self._trusted(relative, stored, key) if len(stored) <= MAX_ENTRY_BYTES else None

    def _trusted(self, relative: str, stored: bytes, key: list[Any]) -> dict[str, Any] | None:
        """The record `stored` holds when it is this user's, under `key`, for the file as it is now."""
        if self.key is None:
            return None
        try:
            entry = _opened(self.key, stored)
            if not isinstance(entry, dict) or entry.get("key") != key:
                return None
            deps: dict[str, str | None] = entry["deps"]
            if deps.get(relative) is None or deps[relative] != entry["sha256"]:
                return None
            if any(self._hash(dep) != digest for dep, digest in deps.items()):
                return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError):
            return None  # corrupt or from another version: never trusted
        return entry

    def _load(self, relative: str) -> Cached | None:
        entry = self._entry(relative)
        if entry is None:
            return None
        try:
            diagnostics = [self._diagnostic(d) for d in entry["diagnostics"]]
            children, uses = tuple(map(str, entry["children"])), tuple(map(str, entry["uses"]))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError):
            return None  # missing, corrupt or from another version: never trusted
        data = self._bytes.pop(relative, None)
        lines = {}
        if data is not None and diagnostics:
            lines = shown_lines(data.decode("utf-8", "replace").removeprefix("\ufeff"), diagnostics)
        source = SourceFile(Path(self._root, relative), self.root, relative, self._display(relative))
        return Cached(source, lines, diagnostics, children, uses)

    def store(
        self,
        relative: str,
        deps: dict[str, str | None],
        diagnostics: list[Diagnostic],
        uses: tuple[str, ...],
        child: Child | None = None,
    ) -> None:
        """Write one file's entry, and the record of its interface (`child`) when given, each
        atomically; failures to write are ignored: the cache is an optimisation."""
        own = deps.get(relative)
        if self.key is None or own is None:
            return
        children = sorted(p for p in deps if p.endswith(".akm") and p != relative and deps[p] is not None)
        entry: dict[str, Any] = {
            "key": self._key(relative),
            "deps": deps,
            "diagnostics": [self._encode(d) for d in diagnostics],
            "children": children,
            "uses": sorted(uses),
            "sha256": own,
        }
        path = self._entry_path(relative)
        try:
            _make_directory(self.directory)
            write_atomically(path, sealed(self.key, entry), mode=0o600)
            if child is not None:
                from akmc import interfaces  # late: a fresh result was compiled, so the compiler is loaded

                record = {
                    "key": [*self._key(relative), "interface"],
                    "deps": deps,
                    "sha256": own,
                    "interface": interfaces.encode(child, self._encode),
                }
                plan = child.canonical if child.plan_hash else b"null"
                stored = b"[" + sealed(self.key, record) + b",\n" + plan + b"]"  # JSON still, read in two
                write_atomically(path.with_suffix(INTERFACE_SUFFIX), stored, mode=0o600)
        except OSError:
            return

    def _encode(self, diagnostic: Diagnostic) -> dict[str, Any]:
        return {
            "code": diagnostic.code,
            "message": diagnostic.message,
            "file": self._rel_of_display(diagnostic.file),
            "span": _span_list(diagnostic.span),
            "help": diagnostic.help,
            "related": [[self._rel_of_display(r.file), _span_list(r.span), r.message] for r in diagnostic.related],
        }

    def _diagnostic(self, data: dict[str, Any]) -> Diagnostic:
        if data["code"] not in CATALOG:
            raise ValueError(data["code"])
        related = tuple(Related(self._display(f), Span(*s), m) for f, s, m in data["related"])
        return Diagnostic(
            data["code"], data["message"], self._display(data["file"]), Span(*data["span"]), data["help"], related
        )

    def _rel_of_display(self, display: str) -> str:
        # A file's diagnostics are encoded one after the other and nearly all name that file.
        if self._last_display[0] != display:
            self._last_display = (display, self.relative(Path(display)) or display)
        return self._last_display[1]

    def _display(self, relative: str) -> str:
        found = self._displays.get(relative)
        if found is None:
            found = self._displays[relative] = display_path(os.path.join(self._root, relative))
        return found


class UsesIndex:
    """The `uses` refs of every workflow in the workspace, keyed by file size and modification time,
    so that finding the parents of a file reads only the workflows that changed since the last check.

    Entries that changed since the index was last written whole go to a small file beside it, so a
    check of one edited file writes one entry, not the whole workspace's; past `FOLD` changed
    entries the index is rewritten whole. Both files are written atomically; a lost update (two
    processes at once) only costs a later check a re-read of the files it names."""

    FOLD = 64

    def __init__(self, root: Path, *, load: bool = True) -> None:
        """`load=False`: start empty (the language server keeps one in memory and never saves it)."""
        directory = root.resolve() / DIRECTORY / f"v{FORMAT}"
        self.path, self.changes_path = directory / "uses-index.json", directory / "uses-index.changes.json"
        self.root = str(root.resolve())
        load = load and _usable(directory.parent)
        self.changes = _json_object(self.changes_path) if load else {}
        self.entries: dict[str, Any] = {**_json_object(self.path), **self.changes} if load else {}
        self.changed = False

    def refs(self, entry: os.DirEntry[str]) -> list[str]:
        return self.refs_at(entry.path, entry.stat)

    def refs_at(self, path: str, stat: Callable[[], os.stat_result] | None = None) -> list[str]:
        """The `uses` refs of the workflow at `path` (absolute): from the index while the file's
        size and modification time are those it recorded, else read again and recorded."""
        try:
            found_stat = stat() if stat is not None else os.stat(path)
        except OSError:
            return []
        known = self.entries.get(path)
        if (
            type(known) is list
            and len(known) == 3
            and known[0] == found_stat.st_mtime_ns
            and known[1] == found_stat.st_size
            and type(known[2]) is list
            and all(type(r) is str for r in known[2])
        ):
            return known[2]
        found = uses_refs(Path(path))
        self.entries[path] = self.changes[path] = [found_stat.st_mtime_ns, found_stat.st_size, found]
        self.changed = True
        return found

    def save(self) -> None:
        if not self.changed:
            return
        whole = len(self.changes) > self.FOLD or not self.path.exists()
        try:
            _make_directory(self.path.parent)
            if whole:
                write_atomically(self.path, json.dumps(self.entries, separators=(",", ":")), mode=0o600)
                self.changes_path.unlink(missing_ok=True)
            else:
                write_atomically(self.changes_path, json.dumps(self.changes, separators=(",", ":")), mode=0o600)
        except OSError:
            return


def _json_object(path: Path) -> dict[str, Any]:
    """The JSON object stored at `path`; empty when it is missing, unreadable or not an object."""
    try:
        data = read_regular(path, MAX_INDEX_BYTES)
        loaded = json.loads(data) if len(data) <= MAX_INDEX_BYTES else None
    except (OSError, ValueError, RecursionError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _usable(top: Path) -> bool:
    """The workspace's `.akmc-cache` is absent or a real directory: never a symlink that would take
    reads and writes elsewhere, never a file."""
    try:
        return stat.S_ISDIR(os.lstat(top).st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _make_directory(directory: Path) -> None:
    """Create `directory` below the workspace's `.akmc-cache/`; the cache directory, when this creates
    it, gets a `.gitignore` of `*`, so a workspace never commits it (a user's later edit is kept).
    OSError when `.akmc-cache` is a symlink or not a directory."""
    top = next(p for p in directory.parents if p.name == DIRECTORY)
    if not _usable(top):
        raise NotADirectoryError(f"{top} is not a directory")
    try:
        top.mkdir(parents=True)
    except FileExistsError:
        pass
    else:
        write_atomically(top / ".gitignore", "*\n")
    directory.mkdir(parents=True, exist_ok=True)


def _span_list(span: Span) -> list[int]:
    return [span.line, span.column, span.end_line, span.end_column, span.start, span.end]
