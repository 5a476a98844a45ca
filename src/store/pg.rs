//! A library on a PostgreSQL server: opened by its URL (`postgres://user@host/db`), its schema
//! made on first use under the same version rules as SQLite's, media bytes kept in the
//! database by content hash (docs/library-server.md says why).

use super::db::{Connection, WRITER_LOCK, params};
use super::{CURRENT_VERSION, OpenMode, Result, Store, StoreError, schema_pg};
use std::path::{Path, PathBuf};

/// The value of `meta.application` in every EndoTwin library on PostgreSQL.
pub const APPLICATION: &str = "endotwin";

/// The URL when `path` names a PostgreSQL library (`postgres://` or `postgresql://`).
pub fn library_url(path: &Path) -> Option<&str> {
    let s = path.to_str()?.trim();
    (s.starts_with("postgres://") || s.starts_with("postgresql://")).then_some(s)
}

/// `url` with any password replaced by `***`: what messages and the store's path show.
pub fn redacted(url: &str) -> String {
    // A password given as a URL parameter is hidden too (round 7 N2).
    if let Some((head, query)) = url.split_once('?') {
        let query: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                _ => pair.to_string(),
            })
            .collect();
        return format!("{}?{}", redacted(head), query.join("&"));
    }
    // Any scheme, in any case, with one slash or two (round 18 N2: `POSTGRES://` and
    // `postgres:/`, refused as mistyped URLs, printed the password).
    let Some((scheme, rest)) = url.split_once(':') else {
        return url.to_string();
    };
    let is_scheme = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c));
    if !is_scheme {
        return url.to_string();
    }
    let slashes = rest.len() - rest.trim_start_matches('/').len();
    let (lead, rest) = rest.split_at(slashes);
    let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((user, host)) if user.contains(':') => {
            let name = user.split(':').next().unwrap_or_default();
            format!("{scheme}:{lead}{name}:***@{host}{tail}")
        }
        _ => url.to_string(),
    }
}

/// Opens (and, with [`OpenMode::CreateIfMissing`], makes) the library in the database at `url`.
pub fn open(url: &str, mode: OpenMode) -> Result<Store> {
    let shown = redacted(url);
    let unreachable = |reason: String| StoreError::Unreachable {
        url: shown.clone(),
        reason,
    };
    // TLS as libpq users know it (`sslmode`, `sslrootcert`): src/store/pg_tls.rs.
    let (client_url, tls) = super::pg_tls::split(url).map_err(&unreachable)?;
    let connector = super::pg_tls::connector(&tls).map_err(&unreachable)?;
    let mut config: postgres::Config = client_url
        .parse()
        .map_err(|e: postgres::Error| unreachable(super::pg_message(&e)))?;
    // The password stays out of the URL (and so out of shell history and messages).
    if config.get_password().is_none()
        && let Ok(password) = std::env::var("PGPASSWORD")
    {
        config.password(password);
    }
    let client = connect_within(config, connector).map_err(unreachable)?;
    let conn = Connection::postgres(client);
    // A write waits for another station's write as long as on SQLite, then says so.
    conn.execute_batch(&format!(
        "SET lock_timeout = '{}s'; SET client_min_messages = warning;",
        super::LOCK_WAIT.as_secs()
    ))?;
    let mut store = Store {
        conn,
        db_path: PathBuf::from(&shown),
        root: cache_folder(&shown),
        read_only: false,
        wait_notice: None,
        checked: false,
    };
    store.check_and_migrate(mode)?;
    // Runs whose process is gone are marked interrupted, as on SQLite (by their lock: a
    // process id means nothing on another machine).
    let stale = super::models::stale_runs(&store.conn)?;
    if !stale.is_empty() {
        super::models::mark_stale_runs(&store.conn, &stale)?;
    }
    Ok(store)
}

/// How long opening a PostgreSQL library waits for the server (the URL's `connect_timeout`,
/// else this): a server that accepts the connection and never answers is named, not waited on.
const CONNECT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// `config.connect`, given up after its `connect_timeout` (else [`CONNECT_WAIT`]) even when
/// the server accepted the socket and went silent (the client's own timeout covers only the
/// socket's connect). A connection given up on is left to end with the process.
fn connect_within(
    mut config: postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
) -> std::result::Result<postgres::Client, String> {
    let wait = *config.get_connect_timeout().unwrap_or(&CONNECT_WAIT);
    config.connect_timeout(wait);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(config.connect(tls));
    });
    match rx.recv_timeout(wait + std::time::Duration::from_secs(1)) {
        Ok(connected) => connected.map_err(|e| {
            let reason = super::pg_message(&e);
            if reason.contains("invalid peer certificate") {
                format!(
                    "{reason}: the server's certificate is not one this station trusts for \
                     this sslmode; name the CA that signed it with sslrootcert=PATH in the URL"
                )
            } else {
                reason
            }
        }),
        Err(_) => Err(format!(
            "the server did not answer within {} s (it accepted the connection but sent nothing; \
             is it a PostgreSQL server, and is it running?)",
            wait.as_secs()
        )),
    }
}

/// This user's cache of a PostgreSQL library's media files (paths for the image loader).
fn cache_folder(shown: &str) -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    let id = &super::content_hash(shown.as_bytes())[..16];
    base.join("endotwin").join("libraries").join(id)
}

/// The schema version in `meta`; a database whose `meta` says another application, or holds
/// tables but no `meta`, is no EndoTwin library.
pub fn schema_version(conn: &Connection) -> Result<i64> {
    let text: String = conn.query_row(
        "SELECT value FROM meta WHERE key = 'schema_version'",
        [],
        |r| r.get(0),
    )?;
    text.trim()
        .parse()
        .map_err(|_| StoreError::Database(format!("schema_version '{text}' is not a number")))
}

/// The version checks of [`Store::open`] on PostgreSQL, then the schema made when the
/// database is empty.
pub(super) fn check_and_create(store: &mut Store, mode: OpenMode) -> Result<()> {
    let path = store.db_path.clone();
    let not_a_library = |reason: &str| StoreError::NotALibrary {
        path: path.clone(),
        reason: reason.into(),
    };
    let tables = table_count(&store.conn)?;
    if tables == 0 {
        if mode == OpenMode::Existing {
            return Err(not_a_library(
                "an empty database: no library in it yet (an import or `endotwin library copy` makes one)",
            ));
        }
        return create(store);
    }
    let has_meta: bool = store.conn.query_row(
        "SELECT EXISTS(SELECT 1 FROM information_schema.tables
                       WHERE table_schema = current_schema() AND table_name = 'meta')",
        [],
        |r| r.get(0),
    )?;
    let application: Option<String> = match has_meta {
        true => store
            .conn
            .rows("SELECT value FROM meta WHERE key = 'application'", [])?
            .first()
            .map(|r| r.get(0))
            .transpose()?,
        false => None,
    };
    if application.as_deref() != Some(APPLICATION) {
        return Err(not_a_library(
            "a PostgreSQL database of another application",
        ));
    }
    let found = schema_version(&store.conn).unwrap_or(-1);
    if found > CURRENT_VERSION {
        return Err(StoreError::NewerSchema {
            path,
            found,
            supported: CURRENT_VERSION,
        });
    }
    if found != CURRENT_VERSION {
        // PostgreSQL libraries start at version 3: an older one was never written.
        return Err(StoreError::UnknownSchema { path, found });
    }
    Ok(())
}

fn table_count(conn: &Connection) -> Result<i64> {
    conn.query_row(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()",
        [],
        |r| r.get(0),
    )
}

/// Makes the schema in one transaction under the writer lock (two stations opening a new
/// library at once make it once).
fn create(store: &mut Store) -> Result<()> {
    let tx = store.conn.transaction()?;
    if table_count(&tx)? > 0 {
        drop(tx);
        return check_and_create(store, OpenMode::Existing);
    }
    tx.execute_batch(schema_pg::SCHEMA)?;
    for (key, value) in [
        ("application", APPLICATION.to_string()),
        ("schema_version", CURRENT_VERSION.to_string()),
        (
            "created_by",
            concat!("endotwin ", env!("CARGO_PKG_VERSION")).to_string(),
        ),
    ] {
        tx.execute(
            "INSERT INTO meta(key, value) VALUES (?1, ?2)",
            params![key, value],
        )?;
    }
    tx.commit()
}

/// After rows were written with their ids (a copy), the identities go on above the highest.
pub fn continue_identities(conn: &Connection) -> Result<()> {
    for (table, columns) in super::copy::COPIED_TABLES {
        if columns.starts_with("id,") {
            conn.rows(
                &format!(
                    "SELECT setval(pg_get_serial_sequence('{table}', 'id'),
                                   coalesce(max(id), 0) + 1, false) FROM {table}"
                ),
                [],
            )?;
        }
    }
    Ok(())
}

/// Whether no other client holds the library's writer lock right now.
pub fn writer_lock_free(conn: &Connection) -> Result<bool> {
    let free: bool = conn.query_row("SELECT pg_try_advisory_lock(?1)", [WRITER_LOCK], |r| {
        r.get(0)
    })?;
    if free {
        conn.execute("SELECT pg_advisory_unlock(?1)", [WRITER_LOCK])?;
    }
    Ok(free)
}

/// Whether `e` is a lock wait that ran out (`lock_timeout`).
pub fn is_lock_timeout(e: &postgres::Error) -> bool {
    e.code() == Some(&postgres::error::SqlState::LOCK_NOT_AVAILABLE)
}

/// Stores a media item's bytes under their hash (once; the same bytes again add nothing).
pub fn put_media_bytes(conn: &Connection, hash: &str, bytes: &[u8]) -> Result<()> {
    conn.execute(
        "INSERT INTO media_files(hash, bytes) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
        params![hash, bytes],
    )?;
    Ok(())
}

/// The bytes stored under `hash`, unchecked (the caller compares their hash).
pub fn media_bytes(conn: &Connection, hash: &str) -> Result<Option<Vec<u8>>> {
    conn.rows("SELECT bytes FROM media_files WHERE hash = ?1", [hash])?
        .first()
        .map(|r| r.get(0))
        .transpose()
}

/// Writes verified bytes into the cache file `path` (whole or not at all).
pub fn write_cache_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("partial{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// What is wrong with the library's tables: the ones missing.
pub fn integrity_problems(conn: &Connection) -> Result<Vec<String>> {
    let present: Vec<String> = conn
        .rows(
            "SELECT CAST(table_name AS TEXT) FROM information_schema.tables
             WHERE table_schema = current_schema()",
            [],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect::<Result<_>>()?;
    Ok(schema_pg::TABLES
        .iter()
        .filter(|t| !present.iter().any(|p| p == *t))
        .map(|t| format!("table {t} is missing"))
        .collect())
}

/// Media bytes no media row names (reported, never deleted).
pub fn unnamed_media(conn: &Connection) -> Result<Vec<String>> {
    conn.rows(
        "SELECT f.hash FROM media_files f
         WHERE NOT EXISTS (SELECT 1 FROM media m WHERE m.hash = f.hash) ORDER BY f.hash",
        [],
    )?
    .iter()
    .map(|r| {
        Ok(format!(
            "media bytes {}: no row names them",
            r.get::<_, String>(0)?
        ))
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_never_reaches_a_message() {
        assert_eq!(
            redacted("postgres://ana:secret@db.local/endo"),
            "postgres://ana:***@db.local/endo"
        );
        assert_eq!(redacted("postgres://ana@db/endo"), "postgres://ana@db/endo");
        // Mistyped schemes are hidden too (round 18 N2); a folder's path is left as it is.
        assert_eq!(
            redacted("POSTGRES://ana:secret@db/endo"),
            "POSTGRES://ana:***@db/endo"
        );
        assert_eq!(
            redacted("postgres:/ana:secret@db/endo"),
            "postgres:/ana:***@db/endo"
        );
        assert_eq!(redacted("/data/a:b@c/lib"), "/data/a:b@c/lib");
        assert_eq!(redacted("lib:one"), "lib:one");
        assert_eq!(
            library_url(Path::new("postgresql://x@y/z")),
            Some("postgresql://x@y/z")
        );
        assert_eq!(library_url(Path::new("sample_db")), None);
    }
}
