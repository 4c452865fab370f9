"""Cache files that many jobs, on one machine or many, can share through one folder (a cluster's network filesystem
included): one SQLite file per writer, read together.

Why not one SQLite file for everyone: SQLite's WAL mode keeps its index in shared memory, which does not work across
the machines of a network filesystem (SQLite's documentation says so; a cache in WAL mode on NFS can be corrupted),
and the rollback journal that does work there depends on POSIX locks that network filesystems implement slowly,
partly (node-local only) or not at all; many jobs writing one file also queue behind one lock ("database is locked").
Here nothing depends on a lock between machines:

- **One writer per file.** A cache is the set of files ``<stem>.<host>.<slot>.sqlite`` in its folder. A process
  writes only its own file, whose name it leases with an exclusive ``flock`` on ``<stem>.<host>.<slot>.lock``: the
  lowest slot of this host that no live process holds. The host's name keeps machines apart (no lock between them
  is needed); the kernel drops the lease when the process ends, however it ends, so a later job (a rerun, a
  requeued job) takes the slot over, SQLite rolls back a transaction that a killed writer left half-done, and the
  number of files is bounded by the most jobs that ever ran at once on each host. Where ``flock`` is unsupported the
  writer uses a file of its own process (``<stem>.<host>.p<pid>-<random>.sqlite``).
- **No WAL.** Each file uses the rollback journal, with ``locking_mode=EXCLUSIVE``: its one writer keeps its lock and
  its page cache, so a look-up costs no round trip to a file server.
- **Lock-free reads of the others.** When a cache opens, it copies every other file of the cache (its peers) as
  plain bytes to this machine's temporary folder, checks the copy (``PRAGMA quick_check``; a copy taken during a
  peer's commit is read again, up to three times, then left out with a warning) and keeps the rows in a private
  temporary database (on disk: memory stays flat however large the folder). A row read from a peer that fails its
  checks is a miss (the work is done again), never a wrong answer. Rows that other jobs write after the open are not
  seen by this run; its rerun sees them.
- A file of the single-file layout of earlier versions (``<stem>.sqlite``) is read the same way (through SQLite, as
  it may be in WAL mode) and never written.

Two jobs that compute the same row both keep it, each in its own file; readers see one row per key.
"""

from __future__ import annotations

import errno
import glob
import os
import re
import secrets
import shutil
import socket
import sqlite3
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import Callable

from posixlab.errors import CacheError

SNAPSHOT_TRIES = 3  # reads of a peer's file before it is left out of this run
# other jobs' files are copied when a cache opens (measured: a 412 MB file of 3 million scores, 9 s, and its size
# twice in the temporary folder while it is read): above this many bytes of them, a warning says how to keep a
# sweep's folders small
PEERS_WARNING_BYTES = 2 * 2**30
MAX_SLOTS = 4096
SQLITE_HEADER = b"SQLite format 3\x00"

_held: set[str] = set()  # lease files this process holds: on NFS, flock is a POSIX lock, which one process may
# take twice; a second cache of the same model in this process must take another slot


def host_label() -> str:
    """This machine's name as a file name part (letters, digits, ``_`` and ``-``)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", socket.gethostname() or "host") or "host"


def _lease(folder: Path, stem: str) -> tuple[Path, int | None, str | None]:
    """The path of this process's file of the cache ``stem``, the descriptor holding its lease (None where flock is
    unsupported) and the lease file's path."""
    host = host_label()
    try:
        import fcntl
    except ImportError:  # no flock on this system: a file of this process
        return folder / f"{stem}.{host}.p{os.getpid()}-{secrets.token_hex(4)}.sqlite", None, None
    for slot in range(MAX_SLOTS):
        name = f"{stem}.{host}.{slot}"
        lock = str(folder / f"{name}.lock")
        if lock in _held:
            continue
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a live process holds this slot
            os.close(fd)
            continue
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):  # no flock here
                return folder / f"{stem}.{host}.p{os.getpid()}-{secrets.token_hex(4)}.sqlite", None, None
            raise
        _held.add(lock)
        return folder / f"{name}.sqlite", fd, lock
    raise OSError(f"more than {MAX_SLOTS} processes of {host} hold files of the cache {folder / stem}")


def _release(fd: int | None, lock: str | None) -> None:
    if fd is not None:
        os.close(fd)  # drops the flock
    if lock is not None:
        _held.discard(lock)


class Segments:
    """This process's SQLite file of a cache (schema ``main``, read and written) and a snapshot of every other file
    of the cache (schema ``peers``, in memory, each row tagged with its file in ``source``).

    ``tables``: table name -> column definitions (the same in every file). ``create(db)``: fill a new file (in a
    transaction the caller does not open). ``check(db, schema, path)``: raise if the file attached as ``schema`` is
    not one of this cache's (``main``: this process's file; ``snap``: a peer's copy). ``error(problem, path)``: the
    ``CacheError`` for a file that cannot be used."""

    def __init__(self, folder: str | Path, stem: str, tables: dict[str, str], *, create: Callable,
                 check: Callable, error: Callable[[str, Path], Exception], check_same_thread: bool = True):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.stem, self.tables, self._check, self._error = stem, tables, check, error
        self.path, fd, lock = _lease(self.folder, stem)
        self._release = weakref.finalize(self, _release, fd, lock)  # at close, or when the cache is collected
        self.sources: list[Path] = []  # the peer files read, by their ``source`` number
        self.skipped: list[Path] = []  # peer files that could not be read (with a warning)
        try:
            self.db = self._open_own(create, check_same_thread)
            try:
                self._read_peers()
            except BaseException:
                self.db.close()
                raise
        except BaseException:
            self._release()
            raise

    # --- this process's file ----------------------------------------------------------------------------------------
    def _open_own(self, create: Callable, check_same_thread: bool) -> sqlite3.Connection:
        existed = self.path.exists() and self.path.stat().st_size > 0
        try:
            db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=check_same_thread)
            try:
                db.execute("PRAGMA locking_mode=EXCLUSIVE")
                if existed:
                    status = db.execute("PRAGMA quick_check").fetchone()[0]
                    if status != "ok":
                        raise self._error(f"is corrupted (SQLite check: {status})", self.path)
                    self._check(db, "main", self.path)
                    db.execute("PRAGMA journal_mode=DELETE")
                else:
                    db.execute("PRAGMA journal_mode=DELETE")
                    db.execute("BEGIN")
                    for table, columns in self.tables.items():
                        db.execute(f"CREATE TABLE IF NOT EXISTS {table} ({columns})")
                    create(db)
                    db.execute("COMMIT")
                return db
            except BaseException:
                db.close()
                raise
        except sqlite3.DatabaseError as exc:
            raise self._error(f"cannot be read as a cache ({exc})", self.path) from None

    # --- the other files ---------------------------------------------------------------------------------------------
    def peer_files(self) -> list[Path]:
        pattern = glob.escape(str(self.folder / self.stem))
        found = {Path(p) for p in glob.glob(pattern + ".sqlite") + glob.glob(pattern + ".*.sqlite")}
        return sorted(p for p in found if p != self.path)

    def _read_peers(self) -> None:
        db = self.db
        # a private temporary database (SQLite's "" file name): its pages spill to a temporary file once they outgrow
        # the page cache, so the peers' rows cost disk, not memory, however large the folder
        db.execute("ATTACH DATABASE '' AS peers")
        for table, columns in self.tables.items():
            db.execute(f"CREATE TABLE peers.{table} ({columns}, source INTEGER)")
        peers = self.peer_files()
        self._warn_if_large(peers)
        for path in peers:
            legacy = path.name == f"{self.stem}.sqlite"
            for attempt in range(SNAPSHOT_TRIES):
                try:
                    if self._read_peer(path, legacy):
                        break
                except CacheError:  # not one of this cache's files (read again: a copy taken while its writer
                    if attempt + 1 == SNAPSHOT_TRIES:  # created it may be incomplete): said, never skipped
                        raise
                    problem = "not a file of this cache"
                except (sqlite3.DatabaseError, OSError) as exc:
                    problem = str(exc)
                else:
                    break  # gone since the listing
                if attempt + 1 < SNAPSHOT_TRIES:
                    time.sleep(0.1 * 3**attempt)
            else:
                self.skipped.append(path)
                print(f"posixlab: warning: cache file {path} could not be read ({problem}); this run does not use "
                      f"its rows. If no job is writing it, it is damaged: delete it", file=sys.stderr)

    def _warn_if_large(self, peers: list[Path]) -> None:
        """A warning when the other jobs' files are large enough to cost minutes and gigabytes at every open: one
        model's cache of a whole paper grid (millions of scores a cell) in one folder is; a folder per cell is not."""
        size = 0
        for path in peers:
            try:
                size += path.stat().st_size
            except OSError:  # gone since the listing
                continue
        if size > PEERS_WARNING_BYTES:
            files = f"{len(peers)} file{'s' if len(peers) != 1 else ''}"
            print(f"posixlab: warning: the other jobs' files of the cache {self.folder / self.stem} ({files}) hold "
                  f"{size / 2**30:.1f} GB, and every run copies them when it opens (about 20 s a GB here, and as much "
                  f"temporary disk). Give each cell of a large sweep its own folder, as the paper's grids do "
                  f"(score_cache_dir='/shared/scores/${{task.run_name}}'; docs/cluster.md)",
                  file=sys.stderr)

    def _read_peer(self, path: Path, legacy: bool) -> bool:
        """Copy one peer's rows into ``peers``; False if the file is gone. Raises DatabaseError for a copy that is
        not consistent (taken during a commit), ``error`` for a file that is not one of this cache's."""
        with tempfile.TemporaryDirectory(prefix="posixlab-cache-") as scratch:
            copy = Path(scratch) / "snapshot.sqlite"
            if not _snapshot(path, copy, legacy):
                return False
            with open(copy, "rb") as f:
                head = f.read(len(SQLITE_HEADER))
            if not head:
                return True  # a file just created and not yet written
            if head != SQLITE_HEADER:  # never torn: every SQLite file starts so from its creation
                raise self._error("cannot be read as a cache (not an SQLite file)", path)
            self._copy_rows(path, copy)
        return True

    def _copy_rows(self, path: Path, copy: Path) -> None:
        """The rows of ``copy``, a snapshot of the peer ``path``, into ``peers``."""
        db = self.db
        db.execute("ATTACH DATABASE ? AS snap", (str(copy),))
        try:
            status = db.execute("PRAGMA snap.quick_check").fetchone()[0]
            if status != "ok":
                raise sqlite3.DatabaseError(f"SQLite check: {status}")
            self._check(db, "snap", path)
            source = len(self.sources)
            db.execute("BEGIN")
            try:
                for table in self.tables:
                    names = [c.strip().split()[0] for c in self.tables[table].split(",") if c.strip()]
                    columns = ", ".join(names)
                    db.execute(f"INSERT OR IGNORE INTO peers.{table} ({columns}, source) "
                               f"SELECT {columns}, {source} FROM snap.{table} ORDER BY key")
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            self.sources.append(path)
        finally:
            db.execute("DETACH DATABASE snap")

    def close(self) -> None:
        try:
            self.db.close()
        finally:
            self._release()


def _snapshot(path: Path, copy: Path, legacy: bool) -> bool:
    """A copy of the peer ``path`` at ``copy``, on this machine's disk (memory stays flat however large the file);
    False if it is gone. A file of the single-file layout, maybe in WAL mode, is copied through SQLite (its WAL's rows
    included) and marked a rollback-journal file; any other is copied as bytes, checked by the caller."""
    if not legacy:
        try:
            shutil.copyfile(path, copy)
        except FileNotFoundError:
            return False
        return True
    if not path.exists():
        return False
    source, target = sqlite3.connect(path, timeout=60), sqlite3.connect(copy)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()
    with open(copy, "r+b") as f:
        if len(f.read(20)) == 20:
            f.seek(18)
            f.write(b"\x01\x01")  # the copy has no WAL: read it as a rollback-journal file
    return True
