//! Per-tenant rules. A tenant's rows (one custom rule each, plus tool tiers) are merged over
//! the base pack as one more overlay and compiled exactly as a pack is, so a row is held to
//! the same checks as a rule written in YAML. The compiled overlays live in the policy store;
//! an event whose `context.tenant` has one is judged by it. `db` reads the rows from
//! PostgreSQL and keeps them fresh.

pub mod db;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::policy::compile::{CompileError, compile_tenant};
use crate::policy::pack::{Node, NodeValue, merged_tree};
use crate::policy::store::{PolicyStore, TenantTable};
use crate::policy::{Policy, compile};

/// One row of `ai_guardrails.policy_rules`.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub rule_id: String,
    pub enabled: bool,
    /// The rule's fields, as under `sync_rules:` in a pack (without `id`).
    pub rule: Value,
    /// Tool glob → tier, as under `tool_risks:`.
    pub tool_risks: Value,
    pub version: i64,
}

/// A tenant's rows could not be used; its last good overlay stays.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("tenant `{tenant}`: {}", problems.join("; "))]
pub struct Rejected {
    pub tenant: String,
    /// Each names the row (`row `block-exports``) and the field.
    pub problems: Vec<String>,
}

/// The overlay a tenant's rows make, and its version: the first 8 hex digits of a hash of
/// the rows, so every replica names the same rows the same way.
pub fn overlay(tenant: &str, rows: &[Row]) -> Result<(Node, String), Rejected> {
    let mut problems = Vec::new();
    let mut rules = Vec::with_capacity(rows.len());
    let mut tiers = Map::new();
    let mut hash = Sha256::new();
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by(|a, b| a.rule_id.cmp(&b.rule_id));
    for r in sorted {
        hash.update(r.rule_id.as_bytes());
        hash.update([0, u8::from(r.enabled)]);
        hash.update(r.rule.to_string().as_bytes());
        hash.update([0]);
        hash.update(r.tool_risks.to_string().as_bytes());
        hash.update(r.version.to_le_bytes());
        let Value::Object(fields) = &r.rule else {
            problems.push(format!("row `{}`: rule: must be a JSON object", r.rule_id));
            continue;
        };
        if fields.contains_key("id") {
            problems.push(format!(
                "row `{}`: rule.id: the id is the row's `rule_id` column; remove it from `rule`",
                r.rule_id
            ));
            continue;
        }
        let mut entry = Map::with_capacity(fields.len() + 2);
        entry.insert("id".into(), Value::String(r.rule_id.clone()));
        entry.insert("enabled".into(), Value::Bool(r.enabled));
        for (k, v) in fields {
            entry.insert(k.clone(), v.clone());
        }
        rules.push(Value::Object(entry));
        match &r.tool_risks {
            Value::Object(t) => {
                // A disabled row's tiers are off with its rule.
                if r.enabled {
                    for (tool, tier) in t {
                        tiers.insert(tool.clone(), tier.clone());
                    }
                }
            }
            _ => problems.push(format!(
                "row `{}`: tool_risks: must be a JSON object of tool → tier",
                r.rule_id
            )),
        }
    }
    if !problems.is_empty() {
        return Err(Rejected {
            tenant: tenant.to_string(),
            problems,
        });
    }
    let mut root = Map::new();
    if !rules.is_empty() {
        root.insert("sync_rules".into(), Value::Array(rules));
    }
    if !tiers.is_empty() {
        root.insert("tool_risks".into(), Value::Object(tiers));
    }
    let version: String = hash.finalize()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok((Node::from_json(&Value::Object(root)), version))
}

/// Compiles a tenant's rows over `base`. A problem names the row and the field.
pub fn compile_rows(base: &Policy, tenant: &str, rows: &[Row]) -> Result<Policy, Rejected> {
    let (node, version) = overlay(tenant, rows)?;
    compile_tenant(base, tenant, node.clone(), &version).map_err(|e| Rejected {
        tenant: tenant.to_string(),
        problems: match e {
            CompileError::Invalid { problems, .. } => {
                let ids = merged_rule_ids(base, node);
                problems
                    .iter()
                    .map(|p| name_row(&p.path, &p.message, &ids, rows))
                    .collect()
            }
            CompileError::Read { message, .. } => vec![message],
        },
    })
}

/// The ids of `sync_rules` after the overlay is merged: a problem's path names an index.
fn merged_rule_ids(base: &Policy, overlay: Node) -> Vec<String> {
    let Ok(root) = merged_tree(&base.text, base.env.as_deref(), Some(overlay)) else {
        return Vec::new();
    };
    match root.get("sync_rules").map(|n| &n.value) {
        Some(NodeValue::Seq(items)) => items
            .iter()
            .map(|n| match n.get("id").map(|v| &v.value) {
                Some(NodeValue::Str(s)) => s.clone(),
                _ => String::new(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// `sync_rules[7].regex: …` → ``row `block-exports`: regex: …``.
fn name_row(path: &str, message: &str, ids: &[String], rows: &[Row]) -> String {
    if let Some(rest) = path.strip_prefix("sync_rules[")
        && let Some((index, field)) = rest.split_once(']')
        && let Some(id) = index.parse::<usize>().ok().and_then(|i| ids.get(i))
        && rows.iter().any(|r| &r.rule_id == id)
    {
        let field = field.trim_start_matches('.');
        let field = if field.is_empty() { "rule" } else { field };
        return format!("row `{id}`: {field}: {message}");
    }
    if let Some(tool) = path.strip_prefix("tool_risks.")
        && let Some(r) = rows
            .iter()
            .find(|r| r.tool_risks.get(tool).is_some() || path == "tool_risks")
    {
        return format!("row `{}`: tool_risks.{tool}: {message}", r.rule_id);
    }
    if path.is_empty() {
        message.to_string()
    } else {
        format!("{path}: {message}")
    }
}

/// What happens to tenants, reported to whoever counts it (the metrics), so this module
/// knows no metrics registry.
pub trait TenantObserver: Send + Sync {
    fn database_up(&self, up: bool);
    fn overlays(&self, count: usize);
    fn rejected(&self);
}

/// The tenants' rows as last read, and the overlays compiled from them. The rows are kept so
/// a pack reload can recompile every overlay without a database round trip.
pub struct Tenants {
    store: Arc<PolicyStore>,
    observer: Option<Arc<dyn TenantObserver>>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Tenant → (overlay version, rows) that compiled.
    good: HashMap<String, (String, Vec<Row>)>,
    /// The base pack the overlays were compiled over.
    base: Option<Arc<str>>,
    database_up: bool,
}

impl Tenants {
    pub fn new(store: Arc<PolicyStore>, observer: Option<Arc<dyn TenantObserver>>) -> Tenants {
        Tenants {
            store,
            observer,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces one tenant's rows. No rows removes its overlay. Rows that do not compile
    /// are rejected and the tenant keeps its last good overlay.
    pub fn apply(&self, tenant: &str, rows: Vec<Row>) -> Result<(), Rejected> {
        let mut st = self.state();
        let base = self.store.load();
        self.rebase_locked(&mut st, &base);
        if rows.is_empty() {
            if st.good.remove(tenant).is_some() {
                tracing::info!(tenant, "tenant has no rows now: it uses the base pack");
                self.publish(&st, |t| {
                    t.overlays.remove(tenant);
                });
            }
            return Ok(());
        }
        let version = overlay(tenant, &rows)?.1;
        if st.good.get(tenant).is_some_and(|(v, _)| *v == version) {
            return Ok(());
        }
        match compile_rows(&base, tenant, &rows) {
            Ok(p) => {
                tracing::info!(tenant, version = %p.version_tag, rows = rows.len(), "tenant overlay loaded");
                let p = Arc::new(p);
                st.good.insert(tenant.to_string(), (version, rows));
                self.publish(&st, |t| {
                    t.overlays.insert(tenant.to_string(), p);
                });
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, "tenant rows rejected; the tenant keeps its last good overlay");
                if let Some(o) = &self.observer {
                    o.rejected();
                }
                Err(e)
            }
        }
    }

    /// Replaces every tenant's rows at once (a full read): tenants that no longer have rows
    /// lose their overlay. Returns the tenants whose rows were rejected.
    pub fn apply_all(&self, mut by_tenant: HashMap<String, Vec<Row>>) -> Vec<Rejected> {
        let known: Vec<String> = self.state().good.keys().cloned().collect();
        for t in known {
            by_tenant.entry(t).or_default();
        }
        let mut rejected = Vec::new();
        for (tenant, rows) in by_tenant {
            if let Err(e) = self.apply(&tenant, rows) {
                rejected.push(e);
            }
        }
        rejected
    }

    /// Whether the database could be read. While it cannot, tenants without an overlay are
    /// judged by the static copy of the base pack (version tag `+static`).
    pub fn set_database_up(&self, up: bool) {
        let mut st = self.state();
        if st.database_up == up && (up || self.store.tenants().fallback.is_some()) {
            return;
        }
        st.database_up = up;
        if up {
            tracing::info!("tenant database reachable: tenants' rows are current");
        } else {
            tracing::warn!(
                overlays = st.good.len(),
                "tenant database unreachable: tenants keep their last good overlay, others use the static pack"
            );
        }
        let fallback = if up {
            None
        } else {
            static_copy(&self.store.load()).map(Arc::new)
        };
        self.publish(&st, |t| t.fallback = fallback);
        if let Some(o) = &self.observer {
            o.database_up(up);
        }
    }

    /// Recompiles the overlays when the base pack was reloaded.
    pub fn rebase(&self) {
        let mut st = self.state();
        let base = self.store.load();
        self.rebase_locked(&mut st, &base);
    }

    fn rebase_locked(&self, st: &mut State, base: &Arc<Policy>) {
        if st.base.as_ref().is_some_and(|b| Arc::ptr_eq(b, &base.text)) {
            return;
        }
        st.base = Some(base.text.clone());
        let mut compiled = HashMap::with_capacity(st.good.len());
        for (tenant, (_, rows)) in &st.good {
            match compile_rows(base, tenant, rows) {
                Ok(p) => {
                    compiled.insert(tenant.clone(), Arc::new(p));
                }
                Err(e) => {
                    // The rows compiled over the old base: its overlay keeps serving.
                    tracing::error!(error = %e, "tenant rows rejected over the reloaded pack; the tenant keeps its last good overlay");
                    if let Some(o) = &self.observer {
                        o.rejected();
                    }
                }
            }
        }
        let fallback = if st.database_up || self.store.tenants().fallback.is_none() {
            None
        } else {
            static_copy(base).map(Arc::new)
        };
        self.publish(st, |t| {
            t.overlays.extend(compiled);
            if fallback.is_some() {
                t.fallback = fallback;
            }
        });
    }

    /// Swaps in a changed copy of the table: readers see the old one or the new one whole.
    fn publish(&self, st: &State, change: impl FnOnce(&mut TenantTable)) {
        let old = self.store.tenants();
        let mut table = TenantTable {
            overlays: old.overlays.clone(),
            fallback: old.fallback.clone(),
        };
        change(&mut table);
        table.overlays.retain(|t, _| st.good.contains_key(t));
        let count = table.overlays.len();
        self.store.swap_tenants(table);
        if let Some(o) = &self.observer {
            o.overlays(count);
        }
    }
}

/// The base pack compiled again, tagged `+static`: what a tenant without an overlay is
/// judged by while its rows cannot be read.
fn static_copy(base: &Policy) -> Option<Policy> {
    match compile(&base.text, &base.source, base.env.as_deref()) {
        Ok(mut p) => {
            p.version_tag = format!("{}+static", base.version_tag);
            p.mode = base.mode;
            p.text = base.text.clone();
            Some(p)
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot compile the static fallback pack");
            None
        }
    }
}

#[cfg(test)]
mod tests;
