"""The pre-push guard: private documents and secrets do not leave the machine through git.

It checks what a push (or a commit, a range, some paths) would publish against two kinds of rule:

- private paths: `kb/` and `artifacts/` (except `kb/README.md` and `kb/.gitkeep`), the index's folder, and
  every file under a configured root that the project's path rules make private (personal mode: all of it);
- secrets: file names (`.env*`, keys, keystores, secrets files) and contents, by `detect-secrets` (the
  maintained detector, with its false-positive filters) plus a few API-key shapes it does not know.

What it checks comes from git's objects (a push, a commit, a range: every commit, since history is what gets
published) or from the working tree (paths). It never follows a symlink and never opens a file outside the
repository; a binary file has only its name checked (and a copy of the index, under any name, is blocked by its
header), and a text file too large to scan is blocked with that reason. Secret values are never printed: a
finding names the file, the kind of secret and the line.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import gzip
import hashlib
import io
import json
import lzma
import os
import re
import shlex
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

import pathspec

from ragstead.config import CONFIG_FILE, IGNORE_FILE, Settings, load_settings
from ragstead.documents.ids import open_regular
from ragstead.documents.metadata import derive_metadata
from ragstead.documents.secret_context import looks_secret
from ragstead.documents.secrets import KEY_PATTERNS as SHAPE_PATTERNS
from ragstead.documents.secrets import URL_PASSWORD, base64_blocks, random_looking
from ragstead.errors import InvalidQueryError, RagsteadError

# Folders private by layout, whatever the roots, and the two marker files that may be published.
PRIVATE_FOLDERS = ("kb", "artifacts")
ALLOWED = frozenset({"kb/README.md", "kb/.gitkeep"})
# The project's own files: settings, not documents.
PROJECT_FILES = frozenset({CONFIG_FILE, IGNORE_FILE, ".gitignore", ".gitattributes", ".pre-commit-config.yaml"})
# Secret-like file names, gitignore syntax: the guard blocks them and `ragstead init` writes them to .gitignore.
SECRET_FILE_PATTERNS = (
    ".env", ".env.*", "!.env.example", "!.env.sample", "!.env.template",
    "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "!id_*.pub",
    "secrets.json", "secrets.yaml", "secrets.yml", "secrets.toml", "credentials.json", ".netrc", ".pgpass",
    "pgpass", "pgpass.*", "*.pgpass", "_netrc",
    "*.ragsnap",  # a portable snapshot (`ragstead export`) holds the whole index: documents, text and vectors
)
# Shapes detect-secrets does not know (it has AWS, GitHub, Slack, Stripe, private keys, JWTs, ...; its OpenAI
# detector only knows the legacy key format, its GitHub one not `github_pat_`, its URL one not a password
# holding `! & #` or `%21`): the project's one detector's, documents/secrets.py.
KEY_PATTERNS = (*SHAPE_PATTERNS, (URL_PASSWORD, "a password in a URL"))
# detect-secrets scans 3,000-8,000 lines a second here (measured): 2 MiB of text takes seconds, not minutes.
DEFAULT_MAX_SCAN_MB = 2
BINARY_SNIFF = 8000  # git's own test: a NUL byte in the first 8000 bytes makes a file binary
# A copy of the SQLite index (every indexed document's text) under any name: the format's header and two of the
# index's own tables, whose CREATE statements SQLite keeps on the file's first page (stores/sqlite.py's schema).
_SQLITE_HEADER = b"SQLite format 3\x00"
_INDEX_TABLES = (b"CREATE TABLE documents", b"CREATE TABLE chunks")
HOOK_MARK = "# ragstead guard"
HOOKS = ("pre-push", "pre-commit")
_NULL_SHA = "0" * 40
_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


@dataclass(frozen=True)
class Finding:
    """A file the guard blocks, with why (never the secret itself)."""

    path: str  # relative to the repository
    rule: str  # private-path | secret-file | secret-content | secret-message | too-large
    reason: str
    commit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "rule": self.rule, "reason": self.reason, "commit": self.commit}


@dataclass
class GuardReport:
    """One check. `to_dict()` is what `ragstead guard check --json` prints."""

    repository: str
    what: str  # the tracked files | staged changes | range A..B | paths | the push to REMOTE
    checked: int = 0
    blocked: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.blocked

    def to_dict(self) -> dict[str, Any]:
        return {"repository": self.repository, "what": self.what, "checked": self.checked, "ok": self.ok,
                "blocked": [f.to_dict() for f in self.blocked]}


@dataclass(frozen=True)
class _File:
    """One file to check: its repository path and where its bytes are (a blob, or a working-tree file)."""

    path: str
    blob: str | None = None  # object id, for files taken from git
    disk: Path | None = None  # for working-tree files
    mode: int = 0o100644
    commit: str | None = None


# -- the repository -------------------------------------------------------------------------------------


class Repository:
    """A git work tree and the ragstead settings that say what is private in it."""

    def __init__(self, start: Path | None = None, config: Path | None = None) -> None:
        here = Path(start).resolve() if start is not None else Path.cwd()
        if not here.is_dir():
            raise InvalidQueryError(f"{here} is not a folder")
        top = self._git_at(here, "rev-parse", "--show-toplevel").strip()
        if not top:
            raise RagsteadError(f"{here} is not inside a git work tree; run this in the repository")
        self.top = Path(top).resolve()
        self.settings = self._project_settings(start, config)
        self.project = self.settings.root.resolve()

    def _project_settings(self, start: Path | None, config: Path | None) -> Settings:
        """The settings of the project at `start` if given, else of the nearest project at or above the current
        folder, else the repository's own top (where `kb/` and `artifacts/` are then looked for)."""
        if start is not None:
            return load_settings(Path(start), config)
        settings = load_settings(None, config)
        root = settings.root
        if not ((root / CONFIG_FILE).is_file() or (root / Settings.db_path).is_file()):
            settings = load_settings(self.top, config)
        return settings

    @staticmethod
    def _git_at(cwd: Path, *args: str, stdin: bytes | None = None, check: bool = True) -> str:
        try:
            result = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, timeout=600)
        except FileNotFoundError:
            raise RagsteadError("git is not installed (or not on PATH)") from None
        if check and result.returncode != 0:
            message = " ".join(result.stderr.decode("utf-8", "replace").split()) or f"exit code {result.returncode}"
            if "not a git repository" in message:
                raise RagsteadError(f"{cwd} is not inside a git work tree; run this in the repository")
            raise RagsteadError(f"git {args[0]} failed: {message}")
        return result.stdout.decode("utf-8", "surrogateescape")

    def git(self, *args: str, stdin: bytes | None = None, check: bool = True) -> str:
        return self._git_at(self.top, *args, stdin=stdin, check=check)



# -- the rules ------------------------------------------------------------------------------------------


class Rules:
    """What may not be published from one repository."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        settings = repo.settings
        self.secret_names = pathspec.GitIgnoreSpec.from_lines(SECRET_FILE_PATTERNS)
        index_dir = settings.db_file.parent.resolve()
        self.index_dir = index_dir.relative_to(repo.project).as_posix() if index_dir.is_relative_to(
            repo.project) else None
        self.roots = tuple(PurePosixPath(r).as_posix() for r in settings.roots)

    def private(self, path: str) -> str | None:
        """Why the repository path `path` is private, or None."""
        full = self.repo.top / path
        if not full.is_relative_to(self.repo.project):
            return None  # outside the ragstead project: only the secret rules apply
        rel = full.relative_to(self.repo.project).as_posix()
        # Compared case-folded: `KB/users/...` is the same folder as `kb/users/...` on macOS and Windows.
        folded = rel.casefold()
        if folded in {a.casefold() for a in ALLOWED} or rel in PROJECT_FILES:
            return None
        if self.index_dir and _under(folded, self.index_dir.casefold()):
            return f"the index's own folder ({self.index_dir}/)"
        top = folded.split("/", 1)[0]
        if top in PRIVATE_FOLDERS and "/" in rel:
            return f"{top}/ holds private data (only {', '.join(sorted(ALLOWED))} may be published)"
        for root in self.roots:
            if _under(rel, root) and derive_metadata(rel, None, self.repo.settings.scope_rules).is_private:
                where = "the project folder" if root in (".", "") else f"{root}/"
                return f"private by the project's path rules (under the indexed root {where})"
        return None

    def secret_name(self, path: str) -> str | None:
        name = PurePosixPath(path).name
        if self.secret_names.match_file(name) or self.secret_names.match_file(name.lower()):
            return f"a secret-like file name ({_which_pattern(name)})"
        return None


def _under(rel: str, folder: str) -> bool:
    return folder in ("", ".") or rel == folder or rel.startswith(folder.rstrip("/") + "/")


def _which_pattern(name: str) -> str:
    for pattern in SECRET_FILE_PATTERNS:
        if not pattern.startswith("!") and pathspec.GitIgnoreSpec.from_lines([pattern]).match_file(name.lower()):
            return pattern
    return name


# -- what to check --------------------------------------------------------------------------------------


def _tracked(repo: Repository) -> Iterator[_File]:
    """Every file in git's index (in CI, the checked-out commit)."""
    out = repo.git("ls-files", "-s", "-z")
    for item in filter(None, out.split("\0")):
        meta, path = item.split("\t", 1)
        mode, blob, _stage = meta.split()
        yield _File(path, blob=blob, mode=int(mode, 8))


def _staged(repo: Repository) -> Iterator[_File]:
    """What the next commit adds or changes (against HEAD, or everything in a first commit)."""
    base = "HEAD" if _rev_exists(repo, "HEAD") else _EMPTY_TREE
    yield from _raw(repo.git("diff-index", "--cached", "-z", "--no-renames", "--diff-filter=ACMT", base))


def _in_commits(repo: Repository, revs: list[str]) -> Iterator[_File]:
    """Every file added or changed by the commits `git log REVS` lists (a merge: against its first parent),
    so a secret added in one commit and removed in the next is still found: the push publishes both."""
    out = repo.git("log", "-z", "--raw", "--no-abbrev", "--no-renames", "--diff-filter=ACMT",
                   "--diff-merges=first-parent", "--format=%x01%H", *revs, "--")
    tokens = [t.lstrip("\n") for t in out.split("\0")]
    commit = None
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("\x01"):
            commit = token[1:]
        elif token.startswith(":") and i + 1 < len(tokens):
            fields = token[1:].split()
            yield _File(tokens[i + 1], blob=fields[3], mode=int(fields[1], 8), commit=commit)
            i += 1
        i += 1


def _raw(out: str) -> Iterator[_File]:
    tokens = out.split("\0")
    for header, path in zip(tokens[0::2], tokens[1::2], strict=False):
        if header.startswith(":"):
            fields = header[1:].split()
            yield _File(path, blob=fields[3], mode=int(fields[1], 8))


def _rev_exists(repo: Repository, rev: str) -> bool:
    result = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=repo.top,
                            capture_output=True)
    return result.returncode == 0


def _push_revs(repo: Repository, lines: Iterable[str], remote: str | None) -> list[tuple[list[str], str]]:
    """What each ref of a push sends, from the lines git gives a pre-push hook: `<local ref> <local sha>
    <remote ref> <remote sha>`: (revisions for `git log`, the local object). A new branch sends what the
    remote does not have yet; a deletion sends nothing."""
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) != 4:
            continue
        _local_ref, local, _remote_ref, theirs = parts
        if local == _NULL_SHA:  # a branch deletion publishes nothing
            continue
        if theirs != _NULL_SHA and _rev_exists(repo, theirs):
            out.append(([f"{theirs}..{local}"], local))
        else:
            out.append(([local, "--not", f"--remotes={remote}" if remote else "--remotes"], local))
    return out


def _pushed(repo: Repository, pushes: list[tuple[list[str], str]]) -> Iterator[_File]:
    """The files of the commits a push sends."""
    for revs, _local in pushes:
        yield from _in_commits(repo, revs)


def _messages(repo: Repository, revs: list[str], objects: Iterable[str] = ()) -> Iterator[tuple[str, str]]:
    """(what, text) of every commit message `git log REVS` lists, and of each annotated tag among `objects`:
    a key pasted into a message is published with it."""
    out = repo.git("log", "-z", "--format=%H%x01%B", *revs, "--")
    for record in filter(None, out.split("\0")):
        sha, _, body = record.lstrip("\n").partition("\x01")
        yield f"the message of commit {sha[:12]}", body
    for obj in objects:
        if repo.git("cat-file", "-t", obj, check=False).strip() == "tag":
            header, _, body = repo.git("cat-file", "tag", obj).partition("\n\n")
            tag = next((line[4:] for line in header.splitlines() if line.startswith("tag ")), obj[:12])
            yield f"the message of tag {tag}", body


def _on_disk(repo: Repository, paths: Iterable[Path]) -> Iterator[_File]:
    """Working-tree files: each path must lie inside the repository; a folder stands for the files git would
    see in it (tracked, or untracked and not ignored)."""
    for given in paths:
        full = Path(os.path.abspath(given))
        # The parent is resolved, the name is not: a symlink is checked as a link, never followed.
        real = Path(os.path.realpath(full.parent)) / full.name
        if not real.is_relative_to(repo.top):
            raise InvalidQueryError(f"{given} is outside the repository {repo.top}; the guard reads nothing "
                                    "outside it")
        rel = real.relative_to(repo.top).as_posix()
        if real.is_dir() and not real.is_symlink():
            listed = repo.git("ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", rel or ".")
            for path in sorted(set(filter(None, listed.split("\0")))):
                yield _File(path, disk=repo.top / path)
        elif os.path.lexists(real):
            yield _File(rel, disk=real)
        else:
            raise InvalidQueryError(f"no such file: {given}")


# -- checking -------------------------------------------------------------------------------------------


class _Blobs:
    """Blob sizes and contents through two long-lived `git cat-file` processes (one per check, not two per
    file). A content is asked for only once its size is known to be within the limit."""

    def __init__(self, top: Path) -> None:
        self._sizes = subprocess.Popen(["git", "cat-file", "--batch-check"], cwd=top, stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE)
        self._contents = subprocess.Popen(["git", "cat-file", "--batch"], cwd=top, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE)
        self.top = top

    @staticmethod
    def _ask(process: subprocess.Popen[bytes], blob: str) -> int:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(f"{blob}\n".encode("ascii"))
        process.stdin.flush()
        header = process.stdout.readline().split()
        if len(header) != 3 or header[1] != b"blob":
            raise RagsteadError(f"git cannot read object {blob} ({b' '.join(header).decode('ascii', 'replace')})")
        return int(header[2])

    def size(self, blob: str) -> int:
        return self._ask(self._sizes, blob)

    def copy(self, blob: str, out: BinaryIO) -> None:
        remaining = self._ask(self._contents, blob)
        stdout = self._contents.stdout
        assert stdout is not None
        while remaining:
            chunk = stdout.read(min(remaining, 1 << 20))
            if not chunk:
                raise RagsteadError(f"git stopped while reading object {blob}")
            out.write(chunk)
            remaining -= len(chunk)
        stdout.read(1)  # the newline after the content

    def head(self, blob: str) -> bytes:
        """The first bytes of a (large) blob, without reading the rest."""
        process = subprocess.Popen(["git", "cat-file", "blob", blob], cwd=self.top, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL)
        try:
            assert process.stdout is not None
            return process.stdout.read(BINARY_SNIFF)
        finally:
            process.kill()
            process.wait()

    def close(self) -> None:
        for process in (self._sizes, self._contents):
            if process.stdin is not None:
                process.stdin.close()
            process.wait()


class _Scanner:
    """Reads each file once, within bounds, and runs the content rules on text. Findings already accepted in
    the repository's detect-secrets baseline (`.secrets.baseline`), or on a line marked
    `pragma: allowlist secret`, do not block."""

    def __init__(self, repo: Repository, max_bytes: int, scratch: Path) -> None:
        self.repo = repo
        self.max_bytes = max_bytes
        self.scratch = scratch
        self.blobs = _Blobs(repo.top)
        self.accepted = _baseline(repo.top / BASELINE_FILE)
        self.rules: Rules | None = None  # set by `check`: archive members' names are checked by it
        self._count = 0

    def content_finding(self, item: _File) -> Finding | None:
        if stat.S_ISLNK(item.mode) or stat.S_ISDIR(item.mode) or item.mode == 0o160000:
            return None  # a symlink's target text or a submodule: nothing to read
        if item.disk is not None:
            return self._check_disk(item)
        return self._check_blob(item)

    def _check_disk(self, item: _File) -> Finding | None:
        assert item.disk is not None
        try:
            info = os.lstat(item.disk)
            if not stat.S_ISREG(info.st_mode):
                return None  # a symlink is never followed; a FIFO or a device is never opened
            with os.fdopen(open_regular(item.disk), "rb") as handle:  # still a regular file when opened
                head = handle.read(BINARY_SNIFF)
                if info.st_size > self.max_bytes:
                    return self._large(item, head, info.st_size)
                data = head + handle.read(self.max_bytes + 1 - len(head))
        except OSError as exc:
            raise RagsteadError(f"cannot read {item.path}: {exc.strerror or exc}") from None
        return self._scan_bytes(item, data, PurePosixPath(item.path).name or "file")

    def _check_blob(self, item: _File) -> Finding | None:
        assert item.blob is not None
        size = self.blobs.size(item.blob)
        if size > self.max_bytes:
            return self._large(item, self.blobs.head(item.blob), size)
        out = io.BytesIO()
        self.blobs.copy(item.blob, out)
        return self._scan_bytes(item, out.getvalue(), PurePosixPath(item.path).name or "file")

    def _scan_bytes(self, item: _File, data: bytes, name: str, depth: int = 0) -> Finding | None:
        """Scan a file's bytes: text as it is; UTF-16, or text with stray NUL bytes, decoded first; a zip or
        gzip archive member by member (a `.env` inside a zip is still a `.env`). A copy of the index is blocked
        whole. Other binaries: nothing."""
        if _is_index(data[:BINARY_SNIFF]):
            return _index_copy(item)
        if depth < MAX_ARCHIVE_DEPTH and (members := _archive_members(data, name, self.max_bytes)) is not None:
            for member, content in members:
                where = f"{item.path} (in the archive: {member})"
                if self.rules is not None and (reason := self.rules.secret_name(member)):
                    return Finding(item.path, "secret-file", f"{reason} inside the archive ({member})", item.commit)
                inner = _File(where, mode=item.mode, commit=item.commit)
                found = self._scan_bytes(inner, content, PurePosixPath(member).name or "file", depth + 1)
                if found is not None:
                    return Finding(item.path, found.rule, f"{found.reason} in the archive member {member}",
                                   item.commit)
            return None
        text = _as_text(data)
        if text is None:
            return None
        if depth and name.lower().endswith((".xml", ".rels")):
            text = _BETWEEN_TAGS.sub("><", text)
        self._count += 1
        # The text goes to a private folder inside the git directory (where its bytes are already), under its
        # own file name: detect-secrets picks its parsers and filters by name. After it, the text's other
        # readings (#45): without invisible characters, an XML part's text without its tags, base64 decoded.
        lines = text.count("\n") + 1
        folder = self.scratch / str(self._count)
        folder.mkdir(mode=0o700)
        target = folder / name
        try:
            target.write_bytes("\n".join([text, *_other_readings(text, name)]).encode("utf-8", "surrogateescape"))
            return self._scan(item, target, lines)
        finally:
            target.unlink(missing_ok=True)
            folder.rmdir()

    def _large(self, item: _File, head: bytes, size: int) -> Finding | None:
        """A file over --max-scan-mb, of which `head` was read: a copy of the index, a binary (its name was
        checked) or a text too large to scan."""
        if _is_index(head):
            return _index_copy(item)
        return None if _binary(head) else self._too_large(item, size)

    def _too_large(self, item: _File, size: int) -> Finding:
        return Finding(item.path, "too-large", f"too large to scan for secrets ({size / (1 << 20):.1f} MiB, over "
                                               f"--max-scan-mb {self.max_bytes / (1 << 20):g})", item.commit)

    def _scan(self, item: _File, path: Path, lines: int | None = None) -> Finding | None:
        """detect-secrets, the key shapes and base64 key bodies line by line, and a table's password column over
        the whole text. A line past `lines` is one of the text's other readings (decoded), reported as such."""
        from detect_secrets.core.scan import scan_file

        accepted = self.accepted.get(item.path, set())
        kinds: dict[str, int] = {}
        for secret in scan_file(str(path)):
            if secret.secret_hash not in accepted:
                kinds.setdefault(secret.type, secret.line_number)
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                line = raw.decode("utf-8", "replace")
                if _ALLOWLISTED.search(line):
                    continue
                for pattern, kind in KEY_PATTERNS:
                    match = pattern.search(line)
                    if match and hashlib.sha1(match.group(0).encode("utf-8")).hexdigest() not in accepted:
                        kinds.setdefault(kind, number)
        text = path.read_text(encoding="utf-8", errors="replace")
        for start, _end in base64_blocks(text):
            kinds.setdefault("a base64-encoded key", text.count("\n", 0, start) + 1)
        if (line := _password_column(text, path.name.lower().endswith(".csv"))) is not None:
            kinds.setdefault("a password in a table's password column", line)
        for match in _CREDENTIAL_ASSIGNMENT.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            if random_looking(match["value"]) and not _ALLOWLISTED.search(match.group(0)):
                kinds.setdefault(f"a random value assigned to {match['name']}", line)
        if not kinds:
            return None
        ordered = sorted(kinds.items(), key=lambda kv: kv[1])
        found = ", ".join(f"{kind} ({_where(line, lines)})" for kind, line in ordered)
        return Finding(item.path, "secret-content", f"secret-like content: {found}", item.commit)

    def close(self) -> None:
        self.blobs.close()


MAX_ARCHIVE_DEPTH = 2  # a zip in a zip is opened; deeper nesting is not
MAX_ARCHIVE_MEMBERS = 1000


def _is_index(head: bytes) -> bool:
    """Whether a file beginning with `head` is a ragstead SQLite index, whatever its name (backup.db, x.bin)."""
    return head.startswith(_SQLITE_HEADER) and all(table in head for table in _INDEX_TABLES)


def _index_copy(item: _File) -> Finding:
    return Finding(item.path, "private-index", "a copy of a ragstead index: it holds the text of every document "
                                               "it indexed, private ones too", item.commit)


def _binary(head: bytes) -> bool:
    """git's test (a NUL in the first 8000 bytes), except for UTF-16 text and text with a few stray NULs."""
    return b"\0" in head and _as_text(head) is None and _archive_kind(head) is None


def _as_text(data: bytes) -> str | None:
    """`data` as text: UTF-8; UTF-16 (with a byte-order mark, or ASCII interleaved with NULs); or UTF-8 with
    stray NUL bytes (one put early to pass for binary). None: binary."""
    if b"\0" not in data:
        return data.decode("utf-8", "replace")
    if data[:4] in (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"):  # before UTF-16: its byte-order mark begins so
        return data.decode("utf-32", "replace")
    if _interleaved(data[:400], 4):
        return data.decode("utf-32-le" if data[0] else "utf-32-be", "replace")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16", "replace")
    sample = data[:200]
    if len(sample) >= 4:
        odd, even = sample[1::2], sample[0::2]
        for zeros, encoding in ((odd, "utf-16-le"), (even, "utf-16-be")):
            if zeros.count(0) >= 0.9 * len(zeros):
                return data.decode(encoding, "replace")
    stripped = data.replace(b"\0", b"")
    if data.count(0) <= max(8, len(data) // 1000):
        try:
            return stripped.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def _archive_kind(data: bytes) -> str | None:
    if data[:4] == b"PK\x03\x04":
        return "zip"
    if data[:2] == b"\x1f\x8b":
        return "gzip"
    if data[:6] == b"\xfd7zXZ\x00":
        return "xz"
    if data[:3] == b"BZh":
        return "bzip2"
    if data[257:262] == b"ustar":
        return "tar"
    return None


def _archive_members(data: bytes, name: str, limit: int) -> list[tuple[str, bytes]] | None:
    """The members of a zip or gzip archive (name, bytes), each read up to `limit` bytes; None when `data` is
    no archive (or a broken one: then its bytes are scanned as they are)."""
    kind = _archive_kind(data)
    try:
        if kind == "zip":
            members = []
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for info in archive.infolist()[:MAX_ARCHIVE_MEMBERS]:
                    if info.is_dir():
                        continue
                    with archive.open(info) as handle:
                        members.append((info.filename, handle.read(limit)))
            return members
        if kind in _STREAMS:
            opener, suffix = _STREAMS[kind]
            with opener(io.BytesIO(data)) as handle:
                inner = name[: -len(suffix)] if name.lower().endswith(suffix) else name
                return [(inner, handle.read(limit))]
        if kind == "tar":
            return _tar_members(data, limit)
    except (OSError, EOFError, ValueError, RuntimeError, NotImplementedError, zipfile.BadZipFile, tarfile.TarError):
        return None  # a broken archive: its bytes are scanned as they are
    return None


# One compressed stream, named by its suffix (`notes.txt.xz` holds `notes.txt`; a `.tar.gz`'s stream is a tar,
# opened in turn: its members' names are checked like a zip's).
_STREAMS: dict[str, tuple[Any, str]] = {"gzip": (lambda f: gzip.GzipFile(fileobj=f), ".gz"),
                                        "xz": (lzma.LZMAFile, ".xz"), "bzip2": (bz2.BZ2File, ".bz2")}


def _tar_members(data: bytes, limit: int) -> list[tuple[str, bytes]]:
    members = []
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        for info in archive.getmembers()[:MAX_ARCHIVE_MEMBERS]:
            handle = archive.extractfile(info) if info.isfile() else None
            if handle is not None:
                members.append((info.name, handle.read(limit)))
    return members


def _interleaved(sample: bytes, width: int) -> bool:
    """ASCII text in UTF-32 without a byte-order mark: of every four bytes, a printable one first (or last) and
    three NULs (a run of zeros, as in a binary, is not text)."""
    rows = [sample[i : i + width] for i in range(0, len(sample) - width + 1, width)]
    if len(rows) < 2:
        return False
    for at in (0, width - 1):
        text = sum(1 for row in rows if 9 <= row[at] < 127 and row.count(0) == width - 1)
        if text >= 0.9 * len(rows):
            return True
    return False


# Characters that show nothing and split a key for a pattern (`sk-…\u200b…`): dropped in one reading of the text.
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u2060-\u2064\ufeff]")
_XML_TAG = re.compile(r"<[^<>]{0,2000}>")
# The blanks between two tags of an archive's XML part (an Office file's members): layout, never content. A
# pretty-printed part (python-docx's stylesWithEffects.xml: 11,800 lines) cost detect-secrets its per-line
# plugins on every line, 9 s for an empty .docx; as one line, every text node and attribute is still read.
_BETWEEN_TAGS = re.compile(r">\s+<")
_BASE64_TOKEN = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{24,}={0,2}(?![A-Za-z0-9+/=])")
_PRINTABLE = re.compile(r"[\t\n\r\x20-\x7e]")


def _other_readings(text: str, name: str) -> list[str]:
    """The text as a reader of it may see what the patterns do not: without invisible characters; an XML part
    (Word's document.xml splits a key over runs) without its tags; base64 tokens decoded (a whole `.env` line
    or PEM key base64'd into one). Empty when there is nothing else to read."""
    readings = []
    visible = _INVISIBLE.sub("", text)
    if visible != text:
        readings.append(visible)
    if name.lower().endswith((".xml", ".rels", ".html", ".htm", ".svg")):
        readings.append(_XML_TAG.sub("", visible))
    for token in _BASE64_TOKEN.findall(visible)[:1000]:
        decoded = _decoded(token)
        if decoded:
            readings.append(decoded)
    return readings


def _decoded(token: str) -> str | None:
    """A base64 token's text, when it decodes to printable UTF-8 (random bytes, an image: None)."""
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return text if len(_PRINTABLE.findall(text)) >= 0.95 * len(text) else None


# A table column that holds passwords, by its header: narrower than the index's masking rule (secret_context's
# `key` column is every settings table of a project's docs), and only values shaped like a password count.
_PASSWORD_HEADER = re.compile(r"^(?:[\w' -]{0,24}[ _-])?(?:pass(?:word|wd|phrase)?|pwd|secret|api[ _-]?key|"
                              r"access[ _-]?key|private[ _-]?key|token)s?$", re.I)
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
_PLACEHOLDER = re.compile(r"^[`\"']?(?:[$<{%]|\*{3}|x{4,}|\.{3})|^[A-Z][A-Z0-9_]+$")


# `aws_secret_access_key = wJalr…`, `API_TOKEN: …`: a name that says credential, a random-looking value (a
# placeholder, `your-token-here`, is not random). detect-secrets reads such lines only in the files it parses
# as config, and a line base64'd whole was read by nothing (#45).
_CREDENTIAL_ASSIGNMENT = re.compile(
    r"(?im)^[ \t]*(?:export[ \t]+)?[\"']?(?P<name>[\w.-]*(?:secret|token|passw(?:or)?d|api[_-]?key|access[_-]?key|"
    r"private[_-]?key)[\w.-]*)[\"']?[ \t]*[:=][ \t]*[\"']?(?P<value>[^\s\"']{16,})")


def _password_column(text: str, csv: bool = False) -> int | None:
    """The line of the first password-shaped value in a markdown table column headed `password` (`secret`,
    `token`, …), or (`csv`: a .csv file) in such a column of its comma-separated lines; None when there is none
    (#45: a table of logins was pushed)."""
    columns: set[int] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if _TABLE_RULE.match(line) or _ALLOWLISTED.search(line):
            continue
        bar = line.strip().startswith("|")
        cells = [c.strip().strip("`") for c in (line.strip().strip("|").split("|") if bar else
                                                line.split(",") if csv else [line])]
        if len(cells) < 2:
            columns = set()
            continue
        if not columns:
            columns = {n for n, cell in enumerate(cells) if _PASSWORD_HEADER.match(cell)}
            continue
        if any(n < len(cells) and looks_secret(cells[n]) and not _PLACEHOLDER.match(cells[n]) for n in columns):
            return number
    return None


def _where(line: int, lines: int | None) -> str:
    return f"line {line}" if lines is None or line <= lines else "decoded"


BASELINE_FILE = ".secrets.baseline"
_ALLOWLISTED = re.compile(r"pragma:\s*allowlist[ -]secret", re.IGNORECASE)


def _baseline(path: Path) -> dict[str, set[str]]:
    """The findings a detect-secrets baseline (`detect-secrets scan > .secrets.baseline`) accepts: path ->
    SHA-1 of each accepted secret."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {name: {item["hashed_secret"] for item in items} for name, items in data.get("results", {}).items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise RagsteadError(f"cannot read the detect-secrets baseline {path}: {exc}") from None


def check(start: Path | None = None, config: Path | None = None, *, staged: bool = False,
          rev_range: str | None = None, paths: Iterable[Path] = (), pre_push: Iterable[str] | None = None,
          remote: str | None = None, max_scan_mb: float = DEFAULT_MAX_SCAN_MB) -> GuardReport:
    """Check what would be published: a push (`pre_push`: the lines git gives the hook on stdin), the staged
    changes, the commits of `rev_range`, working-tree `paths`, or else every tracked file."""
    chosen = [name for name, on in (("--staged", staged), ("--range", rev_range is not None),
                                    ("PATHS", bool(paths)), ("--pre-push", pre_push is not None)) if on]
    if len(chosen) > 1:
        raise InvalidQueryError(f"choose one of --staged, --range, --pre-push or PATHS, got {' and '.join(chosen)}")
    if not max_scan_mb > 0:
        raise InvalidQueryError(f"--max-scan-mb must be above 0, got {max_scan_mb:g}")
    if rev_range is not None and (not rev_range.strip() or rev_range.startswith("-")):
        raise InvalidQueryError(f"--range takes revisions such as main..HEAD, got {rev_range!r}")
    repo = Repository(start, config)
    rules = Rules(repo)
    messages: Iterable[tuple[str, str]] = ()
    if pre_push is not None:
        pushes = _push_revs(repo, pre_push, remote)
        what, files = f"the push to {remote or 'the remote'}", _pushed(repo, pushes)
        messages = (m for revs, local in pushes for m in _messages(repo, revs, [local]))
    elif staged:
        what, files = "the staged changes", _staged(repo)
    elif rev_range is not None:
        if not _rev_exists(repo, rev_range.replace("...", "..").split("..")[-1] or "HEAD"):
            raise InvalidQueryError(f"--range {rev_range}: no such revision in {repo.top}")
        what, files = f"the commits {rev_range}", _in_commits(repo, [rev_range])
        messages = _messages(repo, [rev_range])
    elif paths:
        what, files = "the given paths", _on_disk(repo, paths)
    else:
        what, files = "the tracked files", _tracked(repo)
    report = GuardReport(str(repo.top), what)
    from detect_secrets.settings import default_settings

    git_dir = Path(repo.git("rev-parse", "--absolute-git-dir").strip())
    with default_settings(), tempfile.TemporaryDirectory(dir=git_dir, prefix="ragstead-guard-") as scratch:
        scanner = _Scanner(repo, int(max_scan_mb * (1 << 20)), Path(scratch))
        scanner.rules = rules
        try:
            _check_all(files, rules, scanner, report)
            for label, text in messages:
                found = scanner._scan_bytes(_File(label), text.encode("utf-8", "surrogateescape"), "COMMIT_EDITMSG")
                if found is not None:
                    report.blocked.append(Finding(label, "secret-message", found.reason.replace(
                        "secret-like content", "a secret in the message"), found.commit))
        finally:
            scanner.close()
    report.blocked.sort(key=lambda f: f.path)
    return report


def _check_all(files: Iterable[_File], rules: Rules, scanner: _Scanner, report: GuardReport) -> None:
    """Each file once (a path changed in several commits: each version), the cheap rules first; a path is
    named once, with the first reason found."""
    blocked: set[str] = set()
    seen: set[tuple[str, str]] = set()
    for item in files:
        key = (item.path, item.blob or str(item.disk))
        if key in seen:
            continue
        seen.add(key)
        report.checked += 1
        if item.path in blocked:
            continue
        reason = rules.private(item.path)
        finding = Finding(item.path, "private-path", reason, item.commit) if reason else None
        if finding is None and (name := rules.secret_name(item.path)):
            finding = Finding(item.path, "secret-file", name, item.commit)
        if finding is None:
            finding = scanner.content_finding(item)
        if finding is not None:
            blocked.add(item.path)
            report.blocked.append(finding)


def read_pre_push_input() -> list[str]:
    """The lines git writes to a pre-push hook's stdin."""
    return [] if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read().splitlines()


# -- installing -----------------------------------------------------------------------------------------


def hook_script(hook: str, python: str, root: str | None) -> str:
    """The hook: the guard through this Python (its ragstead), else a `ragstead` on PATH; no guard at all is
    a blocked push (fail closed) with the way out."""
    where = f" --root {shlex.quote(root)}" if root else ""
    if hook == "pre-push":
        check_args = f'--pre-push --remote "$1"{where}'
        feed, chain_feed = 'printf "%s\\n" "$input" | ', 'printf "%s\\n" "$input" | '
        read_input = "input=$(cat)\n"
        skip = "git push --no-verify"
    else:
        check_args = f"--staged{where}"
        feed = chain_feed = ""
        read_input = ""
        skip = "git commit --no-verify"
    quoted = shlex.quote(python)
    return f"""#!/bin/sh
{HOOK_MARK}: blocks publishing private documents and secrets (installed by `ragstead guard install`).
# To publish a blocked file anyway, knowingly, skip the hook once: {skip}
{read_input}guard() {{
  if [ -x {quoted} ]; then {quoted} -m ragstead guard check "$@"
  elif command -v ragstead >/dev/null 2>&1; then ragstead guard check "$@"
  else echo "ragstead guard: ragstead is not installed, so nothing was checked; install it, or skip: {skip}" >&2
       return 2
  fi
}}
{feed}guard {check_args} || exit $?
local_hook="$(dirname "$0")/{hook}.local"
if [ -x "$local_hook" ]; then {chain_feed}"$local_hook" "$@" || exit $?; fi
exit 0
"""


def install(start: Path | None = None, config: Path | None = None, *, hook: str = "pre-push",
            force: bool = False) -> dict[str, Any]:
    """Write the git hook (`pre-push`, or `pre-commit`). A hook that is not ours is kept: refused without
    `force`, else moved to `<hook>.local` and run after the guard. Returns what was written."""
    if hook not in HOOKS:
        raise InvalidQueryError(f"--hook must be pre-push or pre-commit, got {hook!r}")
    repo = Repository(start, config)
    hooks = Path(repo.git("rev-parse", "--git-path", "hooks").strip())
    hooks = hooks if hooks.is_absolute() else repo.top / hooks
    target = hooks / hook
    kept = None
    if target.exists() or target.is_symlink():
        current = target.read_text(encoding="utf-8", errors="replace") if target.is_file() else ""
        if HOOK_MARK not in current:
            if not force:
                raise RagsteadError(f"{target} exists and is not ragstead's; pass --force to keep it as "
                                    f"{hook}.local, run after the guard")
            kept = hooks / f"{hook}.local"
            if kept.exists():
                raise RagsteadError(f"{target} is not ragstead's and {kept} exists too; merge them by hand")
            os.replace(target, kept)
    root = None
    if repo.project != repo.top and repo.project.is_relative_to(repo.top):
        root = repo.project.relative_to(repo.top).as_posix()  # hooks run at the top: point them at the project
    hooks.mkdir(parents=True, exist_ok=True)
    tmp = hooks / f".{hook}.ragstead.tmp"
    tmp.write_text(hook_script(hook, sys.executable, root), encoding="utf-8")
    tmp.chmod(0o755)
    os.replace(tmp, target)
    return {"repository": str(repo.top), "hook": str(target), "kind": hook, "kept": str(kept) if kept else None,
            "project": str(repo.project)}
