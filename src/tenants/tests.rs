use serde_json::json;

use super::*;
use crate::policy::default_policy;

fn row(id: &str, rule: Value) -> Row {
    Row {
        rule_id: id.into(),
        enabled: true,
        rule,
        tool_risks: json!({}),
        version: 1,
    }
}

#[test]
fn rows_compile_into_a_tenant_policy_with_its_version() {
    let base = default_policy(None).unwrap();
    let mut r = row(
        "no-exports",
        json!({"keywords": ["customer export"], "action": "stop", "level": "high",
               "applies_to": ["tool_call_start"], "reason": "exports need review"}),
    );
    r.tool_risks = json!({"crm.export": "critical"});
    let p = compile_rows(&base, "acme", &[r.clone()]).unwrap();
    assert_eq!(p.tenant.as_deref(), Some("acme"));
    assert!(
        p.version_tag
            .starts_with(&format!("{}+tenant/acme@", base.version_tag)),
        "{}",
        p.version_tag
    );
    assert!(p.rules.rules.iter().any(|c| c.id == "no-exports"));
    assert!(!base.rules.rules.iter().any(|c| c.id == "no-exports"));
    // The same rows name the same version; a changed row, another.
    let again = compile_rows(&base, "acme", &[r.clone()]).unwrap();
    assert_eq!(again.version_tag, p.version_tag);
    r.version = 2;
    let changed = compile_rows(&base, "acme", &[r]).unwrap();
    assert_ne!(changed.version_tag, p.version_tag);
}

#[test]
fn a_bad_row_is_named_with_its_field() {
    let base = default_policy(None).unwrap();
    let good = row("fine", json!({"keywords": ["x-ray"], "action": "retry"}));
    let bad = row("broken", json!({"regex": "(", "action": "stop"}));
    let e = compile_rows(&base, "acme", &[good.clone(), bad]).unwrap_err();
    assert_eq!(e.tenant, "acme");
    assert!(
        e.problems
            .iter()
            .any(|p| p.starts_with("row `broken`: regex")),
        "{e}"
    );
    let unknown = row("typo", json!({"keywordz": ["a"]}));
    let e = compile_rows(&base, "acme", &[good.clone(), unknown]).unwrap_err();
    assert!(
        e.problems.iter().any(|p| p.starts_with("row `typo`")),
        "{e}"
    );
    let with_id = row("dup", json!({"id": "other", "keywords": ["a"]}));
    let e = compile_rows(&base, "acme", &[with_id]).unwrap_err();
    assert!(e.problems[0].starts_with("row `dup`: rule.id"), "{e}");
    let mut tier = good;
    tier.tool_risks = json!({"db.*": "extreme"});
    let e = compile_rows(&base, "acme", &[tier]).unwrap_err();
    assert!(
        e.problems
            .iter()
            .any(|p| p.starts_with("row `fine`: tool_risks.db.*")),
        "{e}"
    );
}

#[test]
fn a_tenant_keeps_its_last_good_overlay_when_new_rows_are_bad() {
    let store = Arc::new(PolicyStore::new(default_policy(None).unwrap()));
    let t = Tenants::new(store.clone(), None);
    let good = row("fine", json!({"keywords": ["x-ray"], "action": "retry"}));
    t.apply("acme", vec![good.clone()]).unwrap();
    let before = store.for_tenant("acme", store.load()).version_tag.clone();
    assert!(before.contains("+tenant/acme@"));
    let bad = row("fine", json!({"regex": "(", "action": "stop"}));
    assert!(t.apply("acme", vec![bad]).is_err());
    assert_eq!(store.for_tenant("acme", store.load()).version_tag, before);
    // Another tenant, and no tenant, get the base pack.
    assert_eq!(
        store.for_tenant("globex", store.load()).version_tag,
        store.load().version_tag
    );
    assert_eq!(
        store.for_tenant("", store.load()).version_tag,
        store.load().version_tag
    );
    // No rows: back to the base pack.
    t.apply("acme", vec![]).unwrap();
    assert_eq!(
        store.for_tenant("acme", store.load()).version_tag,
        store.load().version_tag
    );
}

#[test]
fn while_the_database_is_down_tenants_without_an_overlay_are_judged_by_the_static_pack() {
    let store = Arc::new(PolicyStore::new(default_policy(None).unwrap()));
    let t = Tenants::new(store.clone(), None);
    t.apply("acme", vec![row("fine", json!({"keywords": ["x-ray"]}))])
        .unwrap();
    t.set_database_up(false);
    let base = store.load().version_tag.clone();
    assert_eq!(
        store.for_tenant("globex", store.load()).version_tag,
        format!("{base}+static")
    );
    assert!(
        store
            .for_tenant("acme", store.load())
            .version_tag
            .contains("+tenant/acme@")
    );
    t.set_database_up(true);
    assert_eq!(store.for_tenant("globex", store.load()).version_tag, base);
}

#[test]
fn a_full_read_drops_tenants_that_have_no_rows_left() {
    let store = Arc::new(PolicyStore::new(default_policy(None).unwrap()));
    let t = Tenants::new(store.clone(), None);
    t.apply("acme", vec![row("a", json!({"keywords": ["x-ray"]}))])
        .unwrap();
    let mut all = HashMap::new();
    all.insert(
        "globex".to_string(),
        vec![row("b", json!({"keywords": ["y"]}))],
    );
    assert!(t.apply_all(all).is_empty());
    let tbl = store.tenants();
    assert!(tbl.overlays.contains_key("globex"));
    assert!(!tbl.overlays.contains_key("acme"));
}

#[test]
fn a_reloaded_pack_recompiles_the_overlays_over_it() {
    let store = Arc::new(PolicyStore::new(default_policy(None).unwrap()));
    let t = Tenants::new(store.clone(), None);
    t.apply("acme", vec![row("a", json!({"keywords": ["x-ray"]}))])
        .unwrap();
    let text = crate::policy::DEFAULT_PACK.replacen("version: \"1.0\"", "version: \"9.0\"", 1);
    store.swap(compile(&text, "edited", None).unwrap());
    t.rebase();
    let p = store.for_tenant("acme", store.load());
    assert!(
        p.version_tag.starts_with(&store.load().version_tag),
        "{}",
        p.version_tag
    );
    assert!(p.rules.rules.iter().any(|c| c.id == "a"));
}
