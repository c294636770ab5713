//! Versioned schema migrations, applied on start.
//!
//! The schema is a log: `apiserver_log` has one row per write whose primary key is the revision; tombstones mark
//! deletes; `old_value` keeps the previous value for watches. `apiserver_meta` is a single row holding the current
//! revision, the compacted revision and how far compaction has physically deleted rows. Writers lock and bump that
//! row inside their transaction, which serializes them: revisions are then gap-free and in commit order, which a
//! database sequence is not (sequence values are taken before commit and lost on rollback).
//!
//! Each migration is a list of statements run in one transaction together with the row that records its version,
//! so a crash never leaves a half-applied version. Append new versions; never edit a released one.

/// One schema version.
pub(crate) struct Migration {
    pub version: i64,
    pub description: &'static str,
    pub statements: &'static [&'static str],
}

/// The table that records applied versions.
#[cfg(feature = "sqlite")]
pub(crate) const VERSION_TABLE_SQLITE: &str = "CREATE TABLE IF NOT EXISTS apiserver_schema_version \
     (version INTEGER PRIMARY KEY, description TEXT NOT NULL) STRICT";
#[cfg(feature = "postgres")]
pub(crate) const VERSION_TABLE_POSTGRES: &str = "CREATE TABLE IF NOT EXISTS apiserver_schema_version \
     (version BIGINT PRIMARY KEY, description TEXT NOT NULL)";

/// SQLite: `name` compares with the BINARY collation (memcmp), which is byte order.
#[cfg(feature = "sqlite")]
pub(crate) const SQLITE: &[Migration] = &[Migration {
    version: 1,
    description: "log table, meta row, indexes",
    statements: &[
        "CREATE TABLE apiserver_meta (id INTEGER PRIMARY KEY CHECK (id = 1), revision INTEGER NOT NULL, \
         compacted INTEGER NOT NULL, compact_cursor INTEGER NOT NULL) STRICT",
        "INSERT INTO apiserver_meta (id, revision, compacted, compact_cursor) VALUES (1, 0, 0, 0)",
        "CREATE TABLE apiserver_log (revision INTEGER PRIMARY KEY, name TEXT NOT NULL, created INTEGER NOT NULL, \
         deleted INTEGER NOT NULL, prev_revision INTEGER NOT NULL, value BLOB NOT NULL, old_value BLOB) STRICT",
        // The compare-and-swap guard: two writers that start from the same previous row cannot both insert.
        "CREATE UNIQUE INDEX apiserver_log_name_prev_revision ON apiserver_log (name, prev_revision)",
        // Latest row of a key at a revision, and the walk from one key to the next: O(log n) each.
        "CREATE UNIQUE INDEX apiserver_log_name_revision ON apiserver_log (name, revision)",
    ],
}];

/// Postgres: `name` is `COLLATE "C"` so ranges and indexes follow byte order whatever the database's locale.
#[cfg(feature = "postgres")]
pub(crate) const POSTGRES: &[Migration] = &[Migration {
    version: 1,
    description: "log table, meta row, indexes, write function",
    statements: &[
        "CREATE TABLE apiserver_meta (id INTEGER PRIMARY KEY CHECK (id = 1), revision BIGINT NOT NULL, \
         compacted BIGINT NOT NULL, compact_cursor BIGINT NOT NULL) WITH (fillfactor = 20)",
        "INSERT INTO apiserver_meta (id, revision, compacted, compact_cursor) VALUES (1, 0, 0, 0)",
        "CREATE TABLE apiserver_log (revision BIGINT PRIMARY KEY, name TEXT COLLATE \"C\" NOT NULL, \
         created BOOLEAN NOT NULL, deleted BOOLEAN NOT NULL, prev_revision BIGINT NOT NULL, value BYTEA NOT NULL, \
         old_value BYTEA)",
        "CREATE UNIQUE INDEX apiserver_log_name_prev_revision ON apiserver_log (name, prev_revision)",
        "CREATE UNIQUE INDEX apiserver_log_name_revision ON apiserver_log (name, revision)",
        // One round trip per write: lock the meta row (serializing writers), read the key's latest row with a
        // fresh snapshot (a VOLATILE function takes one per statement), compare, append, bump the revision and
        // NOTIFY other replicas; the notification is delivered at commit, in commit order.
        // p_expected = 0: the key must not exist; n > 0: its latest row must be live at revision n.
        r#"CREATE FUNCTION apiserver_write(p_name TEXT, p_expected BIGINT, p_delete BOOLEAN, p_value BYTEA)
RETURNS TABLE (o_written BOOLEAN, o_revision BIGINT, o_cur_revision BIGINT, o_cur_deleted BOOLEAN,
               o_cur_value BYTEA)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    c_rev BIGINT;
    c_deleted BOOLEAN;
    c_value BYTEA;
    c_live BOOLEAN;
    n_rev BIGINT;
BEGIN
    PERFORM 1 FROM apiserver_meta m WHERE m.id = 1 FOR UPDATE;
    SELECT l.revision, l.deleted, l.value INTO c_rev, c_deleted, c_value
        FROM apiserver_log l WHERE l.name = p_name ORDER BY l.revision DESC LIMIT 1;
    c_live := c_rev IS NOT NULL AND NOT c_deleted;
    IF (p_expected = 0 AND NOT c_live AND NOT p_delete) OR (p_expected <> 0 AND c_live AND c_rev = p_expected) THEN
        UPDATE apiserver_meta m SET revision = m.revision + 1 WHERE m.id = 1 RETURNING m.revision INTO n_rev;
        INSERT INTO apiserver_log (revision, name, created, deleted, prev_revision, value, old_value)
            VALUES (n_rev, p_name, NOT c_live, p_delete, COALESCE(c_rev, 0),
                    CASE WHEN p_delete THEN ''::bytea ELSE p_value END,
                    CASE WHEN c_live THEN c_value ELSE NULL END);
        PERFORM pg_notify('apiserver_log', n_rev::text);
        RETURN QUERY SELECT true, n_rev, c_rev, c_deleted, c_value;
    ELSE
        RETURN QUERY SELECT false, 0::bigint, c_rev, c_deleted, c_value;
    END IF;
END
$fn$"#,
    ],
}];
