//! Every policy pack the project ships, in `deploy/` and `helm/`, compiles as the server
//! compiles it: pack files, and packs inside ConfigMap manifests.

use std::path::{Path, PathBuf};

use toolgate::policy::compile;

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            // Chart templates are Go templates, not YAML until Helm renders them; the chart
            // check (helm/check.py) validates what they render.
            if p.file_name().is_some_and(|n| n == "templates") {
                continue;
            }
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
}

#[test]
fn every_shipped_pack_compiles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    yaml_files(&root.join("deploy"), &mut files);
    yaml_files(&root.join("helm"), &mut files);
    let mut packs = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let name = f.strip_prefix(root).unwrap().display().to_string();
        let mut texts = Vec::new();
        for doc in serde_saphyr::from_multiple::<serde_json::Value>(&text).unwrap_or_default() {
            if doc.get("policy_pack").is_some() {
                texts.push(text.clone());
            } else if doc["kind"] == "ConfigMap"
                && let Some(data) = doc["data"].as_object()
            {
                texts.extend(
                    data.values()
                        .filter_map(|v| v.as_str())
                        .filter(|t| t.contains("policy_pack:"))
                        .map(str::to_string),
                );
            }
        }
        for t in texts {
            let p = compile(&t, &name, None).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(p.warnings.is_empty(), "{name}: {:?}", p.warnings);
            packs += 1;
        }
    }
    // The default pack (twice: deploy/policies and the chart's link to it) and the packs
    // of the two example manifests.
    assert!(packs >= 4, "found {packs} packs in {files:?}");
}
