"""The one way the SQLite side opens a transaction: BEGIN, then COMMIT, or ROLLBACK on any error."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def transaction(db: sqlite3.Connection, *, immediate: bool = True) -> Iterator[sqlite3.Connection]:
    """One transaction on a connection opened with `isolation_level=None` (sqlite3 then never begins one itself).

    `immediate`: take the write lock at BEGIN (a writer), so two writers never both read then fail to upgrade;
    False: a deferred BEGIN, one consistent snapshot for a reader that rebuilds a derived index from it.
    """
    db.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield db
    except BaseException:
        if db.in_transaction:  # SQLite rolls some errors (a full disk, an interrupt) back itself
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
