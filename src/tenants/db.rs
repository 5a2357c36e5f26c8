//! PostgreSQL: the schema's migrations, reading tenants' rows, and the task that keeps them
//! fresh (LISTEN/NOTIFY for changes, a full read every `cache_ttl_s`, reconnection with
//! backoff). Decisions never wait on the database: they read the compiled overlays.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{mpsc, watch};
use tokio_postgres::{AsyncMessage, Client, NoTls};

use super::{Row, Tenants};

/// The channel the schema's trigger notifies, with the tenant as payload.
pub const CHANNEL: &str = "ai_guardrails_policy_rules";

/// The schema, in order. Applied once each and recorded with a checksum, so an edited
/// migration is refused instead of silently skipped.
pub const MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_policy_rules",
        include_str!("../../deploy/postgres/0001_policy_rules.sql"),
    ),
    (
        "0002_notify",
        include_str!("../../deploy/postgres/0002_notify.sql"),
    ),
];

/// Connecting and each query are bounded: a dead database never stalls the refresher.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
/// Reconnection backoff: doubles from the first to the last.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Tenants named by notifications not yet read; past this a full read replaces them.
const NOTIFY_BUFFER: usize = 1024;
/// A lock id for migrations, so replicas starting together migrate one at a time.
const MIGRATE_LOCK: i64 = 0x746f_6f6c_6761_7465;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("tenant database: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    #[error("tenant database: no answer within {0:?}")]
    Timeout(Duration),
    #[error("tenant database: {0}")]
    Schema(String),
    #[error("tenant database: the connection closed")]
    Closed,
}

async fn bounded<T>(
    d: Duration,
    f: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, DbError> {
    match tokio::time::timeout(d, f).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(DbError::Timeout(d)),
    }
}

/// A connection, with its driver task forwarding notifications to `notes`. The driver ends
/// (and `notes` closes) when the connection does.
async fn connect(url: &str) -> Result<(Client, mpsc::Receiver<String>, Arc<AtomicBool>), DbError> {
    let mut cfg: tokio_postgres::Config = url.parse()?;
    cfg.connect_timeout(CONNECT_TIMEOUT)
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(30))
        .application_name("toolgate");
    let (client, mut conn) = bounded(CONNECT_TIMEOUT, cfg.connect(NoTls)).await?;
    let (tx, rx) = mpsc::channel(NOTIFY_BUFFER);
    let overflowed = Arc::new(AtomicBool::new(false));
    let flag = overflowed.clone();
    tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
        while let Some(m) = messages.next().await {
            match m {
                Ok(AsyncMessage::Notification(n)) => {
                    if tx.try_send(n.payload().to_string()).is_err() {
                        // Too many at once: the refresher reads everything instead.
                        flag.store(true, Ordering::Relaxed);
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "tenant database connection ended");
                    break;
                }
            }
        }
    });
    Ok((client, rx, overflowed))
}

/// Applies the migrations not yet applied, in order, each in its own transaction.
/// Returns the names applied now.
pub async fn migrate(url: &str) -> Result<Vec<String>, DbError> {
    let (mut client, _notes, _) = connect(url).await?;
    bounded(
        QUERY_TIMEOUT,
        client.batch_execute(
            "CREATE SCHEMA IF NOT EXISTS ai_guardrails;
             CREATE TABLE IF NOT EXISTS ai_guardrails.schema_migrations (
                 name text PRIMARY KEY,
                 sha256 text NOT NULL,
                 applied_at timestamptz NOT NULL DEFAULT now())",
        ),
    )
    .await?;
    bounded(
        QUERY_TIMEOUT,
        client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATE_LOCK]),
    )
    .await?;
    let mut applied = Vec::new();
    let result = async {
        for (name, sql) in MIGRATIONS {
            let sum = crate::text::lower_hex(&<sha2::Sha256 as sha2::Digest>::digest(sql));
            let tx = client.transaction().await?;
            let done = tx
                .query_opt(
                    "SELECT sha256 FROM ai_guardrails.schema_migrations WHERE name = $1",
                    &[name],
                )
                .await?;
            match done {
                Some(row) => {
                    let was: String = row.get(0);
                    if was != sum {
                        return Err(DbError::Schema(format!(
                            "migration `{name}` was applied with different text (sha256 {was}); \
                             migrations must not change once applied"
                        )));
                    }
                }
                None => {
                    tx.batch_execute(sql).await?;
                    tx.execute(
                        "INSERT INTO ai_guardrails.schema_migrations (name, sha256) VALUES ($1, $2)",
                        &[name, &sum],
                    )
                    .await?;
                    tx.commit().await?;
                    applied.push(name.to_string());
                }
            }
        }
        Ok(())
    }
    .await;
    // The lock is the session's: it goes with the connection even if this fails.
    let _ = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATE_LOCK])
        .await;
    result.map(|()| applied)
}

const SELECT: &str = "SELECT tenant, rule_id, enabled, rule, tool_risks, version \
                      FROM ai_guardrails.policy_rules";

fn row(r: &tokio_postgres::Row) -> Result<(String, Row), tokio_postgres::Error> {
    Ok((
        r.try_get(0)?,
        Row {
            rule_id: r.try_get(1)?,
            enabled: r.try_get(2)?,
            rule: r.try_get(3)?,
            tool_risks: r.try_get(4)?,
            version: r.try_get(5)?,
        },
    ))
}

/// Every tenant's rows.
pub async fn load_all(client: &Client) -> Result<HashMap<String, Vec<Row>>, DbError> {
    let rows = bounded(QUERY_TIMEOUT, client.query(SELECT, &[])).await?;
    let mut out: HashMap<String, Vec<Row>> = HashMap::new();
    for r in &rows {
        let (tenant, row) = row(r)?;
        out.entry(tenant).or_default().push(row);
    }
    Ok(out)
}

/// One tenant's rows.
pub async fn load_tenant(client: &Client, tenant: &str) -> Result<Vec<Row>, DbError> {
    let sql = format!("{SELECT} WHERE tenant = $1");
    let rows = bounded(QUERY_TIMEOUT, client.query(&sql, &[&tenant])).await?;
    rows.iter()
        .map(|r| row(r).map(|(_, row)| row))
        .collect::<Result<_, _>>()
        .map_err(DbError::from)
}

/// Reads one tenant's rows once (for `toolgate test --tenant`).
pub async fn read_tenant(url: &str, tenant: &str) -> Result<Vec<Row>, DbError> {
    let (client, _notes, _) = connect(url).await?;
    load_tenant(&client, tenant).await
}

/// Keeps `tenants` in step with the database until `shutdown` flips: a full read on every
/// (re)connection and every `ttl`, one tenant's read on each notification, and a recompile
/// when the base pack is reloaded. While the database is unreachable it retries with
/// backoff and the store serves the last good overlays.
pub async fn run(
    url: String,
    tenants: Arc<Tenants>,
    ttl: impl Fn() -> Duration + Send + Sync + 'static,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut backoff = BACKOFF_FIRST;
    loop {
        let mut connected = false;
        match refresh(&url, &tenants, &ttl, &mut shutdown, &mut connected).await {
            Ok(()) => return,
            Err(e) => {
                if connected {
                    backoff = BACKOFF_FIRST;
                }
                tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "tenant database unavailable");
                off_thread(&tenants, |t| t.set_database_up(false)).await;
            }
        }
        tokio::select! {
            _ = stopped(&mut shutdown) => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        // A pack reloaded while the database is down still reaches the overlays.
        off_thread(&tenants, Tenants::rebase).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// Compiling overlays takes tens of milliseconds each: it runs on the blocking pool, never
/// on a worker that serves calls.
async fn off_thread(tenants: &Arc<Tenants>, f: impl FnOnce(&Tenants) + Send + 'static) {
    let t = tenants.clone();
    if let Err(e) = tokio::task::spawn_blocking(move || f(&t)).await {
        tracing::error!(error = %e, "tenant overlay update failed");
    }
}

/// Resolves once shutdown is signalled (the watch guard is not held across an await).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}

/// One connection's life: returns `Ok` on shutdown, the error that ended it otherwise.
async fn refresh(
    url: &str,
    tenants: &Arc<Tenants>,
    ttl: &impl Fn() -> Duration,
    shutdown: &mut watch::Receiver<bool>,
    connected: &mut bool,
) -> Result<(), DbError> {
    let (client, mut notes, overflowed) = connect(url).await?;
    *connected = true;
    bounded(
        QUERY_TIMEOUT,
        client.batch_execute(&format!("LISTEN {CHANNEL}")),
    )
    .await?;
    // Listening first, reading second: a change between the two is read twice, never
    // missed.
    let all = load_all(&client).await?;
    off_thread(tenants, move |t| {
        t.apply_all(all);
        t.set_database_up(true);
    })
    .await;
    let mut full = tokio::time::interval(ttl());
    full.reset();
    let mut rebase = tokio::time::interval(crate::policy::reload::POLL_INTERVAL);
    loop {
        tokio::select! {
            _ = stopped(shutdown) => return Ok(()),
            note = notes.recv() => {
                let Some(tenant) = note else {
                    return Err(DbError::Closed);
                };
                if overflowed.swap(false, Ordering::Relaxed) {
                    let all = load_all(&client).await?;
                    off_thread(tenants, move |t| {
                        t.apply_all(all);
                    })
                    .await;
                } else {
                    let rows = load_tenant(&client, &tenant).await?;
                    // A rejection is logged and counted; the tenant keeps its last overlay.
                    off_thread(tenants, move |t| {
                        let _ = t.apply(&tenant, rows);
                    })
                    .await;
                }
            }
            _ = full.tick() => {
                let all = load_all(&client).await?;
                off_thread(tenants, move |t| {
                    t.apply_all(all);
                })
                .await;
                let every = ttl();
                if every != full.period() {
                    full = tokio::time::interval(every);
                    full.reset();
                }
            }
            _ = rebase.tick() => off_thread(tenants, Tenants::rebase).await,
        }
    }
}
