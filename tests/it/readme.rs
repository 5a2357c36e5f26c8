//! README.md's YAML examples are checked, so the documentation cannot drift from what the
//! server accepts: every policy pack and pack fragment compiles with the same
//! `policy::compile` the server runs, and every scenario list parses as scenarios and, when it
//! only names rules of the default pack, passes against it.

use std::collections::BTreeSet;
use std::sync::Arc;

use toolgate::engine::pipeline::Runtime;
use toolgate::policy::pack::{Node, NodeValue, parse_yaml};
use toolgate::policy::{compile, default_policy};
use toolgate::scenario::{Case, Report, parse_cases, run_cases};

/// README's yaml blocks today: a scenario list ("Regression scenarios"), a whole pack
/// ("Policy packs") and a fragment ("Deep rules, tiers, sessions and approvals"). More is fine;
/// fewer means a block was lost, by the README or by the extractor.
const MIN_BLOCKS: usize = 3;

/// The header that completes a fragment (top-level pack keys without `policy_pack`).
const FRAGMENT_NAME: &str = "policy_pack: readme-fragment";
const FRAGMENT_VERSION: &str = "version: \"0\"";

/// One fenced ```yaml block.
struct Block {
    /// 1-based, in README order among the yaml blocks.
    index: usize,
    /// 0-based line of the opening fence; the block's text starts on the next line.
    fence: usize,
    text: String,
}

impl Block {
    /// How failures name the block: its index, README line and first line.
    fn name(&self) -> String {
        let first = self
            .text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        format!(
            "README.md yaml block {} (line {}: `{}`)",
            self.index,
            self.fence + 2,
            first.trim()
        )
    }

    /// The block's text preceded by `header` and blank lines, so line numbers in YAML and
    /// compile errors are README line numbers.
    fn at_readme_lines(&self, header: &[&str]) -> String {
        // INVARIANT: README's yaml blocks start well below its first lines.
        assert!(
            header.len() <= self.fence + 1,
            "{}: too near the top",
            self.name()
        );
        let mut text = String::new();
        for line in header {
            text.push_str(line);
            text.push('\n');
        }
        text.push_str(&"\n".repeat(self.fence + 1 - header.len()));
        text.push_str(&self.text);
        text
    }
}

/// Every fenced block whose info string is `yaml`, with the fence's indentation removed (a
/// block inside a list item is indented). Other fenced blocks are skipped whole, so a fence
/// line quoted inside one is not taken for a block.
fn yaml_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    // (fence line, indentation, is yaml, text so far) of the block being read.
    let mut open: Option<(usize, usize, bool, String)> = None;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match open.as_mut() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    open = Some((i, indent, info.trim() == "yaml", String::new()));
                }
            }
            Some((fence, fence_indent, is_yaml, text)) => {
                if trimmed.starts_with("```") && trimmed.trim_end_matches('`').trim().is_empty() {
                    if *is_yaml {
                        blocks.push(Block {
                            index: blocks.len() + 1,
                            fence: *fence,
                            text: std::mem::take(text),
                        });
                    }
                    open = None;
                } else {
                    let cut = indent.min(*fence_indent);
                    text.push_str(&line[cut..]);
                    text.push('\n');
                }
            }
        }
    }
    assert!(open.is_none(), "README.md: a fenced block is never closed");
    blocks
}

fn keys(node: &Node) -> Vec<&str> {
    match &node.value {
        NodeValue::Map(items) => items.iter().map(|(k, _)| k.as_str()).collect(),
        _ => Vec::new(),
    }
}

/// Rule ids a scenario list expects to hit; a list that needs a rule the default pack lacks
/// was written for another pack and is only parsed.
fn named_rules(cases: &[Case]) -> BTreeSet<&str> {
    cases
        .iter()
        .flat_map(Case::expectations)
        .flat_map(|e| e.rules.iter().chain(e.rules_include.iter()).flatten())
        .map(String::as_str)
        .collect()
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Kinds {
    packs: usize,
    fragments: usize,
    scenario_lists: usize,
    scenarios_run: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_yaml_blocks_compile_and_scenarios_pass() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let blocks = yaml_blocks(&readme);
    assert!(
        blocks.len() >= MIN_BLOCKS,
        "found {} yaml blocks in README.md, expected at least {MIN_BLOCKS}: {:?}",
        blocks.len(),
        blocks.iter().map(Block::name).collect::<Vec<_>>()
    );

    let mut default = default_policy(None).unwrap();
    // Scenarios judge rules, not machine speed, as `toolgate test` does.
    default.sync.limited = false;
    let default_rules: BTreeSet<String> = default
        .rules
        .rules
        .iter()
        .map(|r| r.id.clone())
        .chain(default.deep.iter().map(|d| d.id.clone()))
        .chain(default.flow.flows.iter().map(|f| f.id.clone()))
        .chain(
            [
                toolgate::flow::UNTRUSTED_DESTINATION_RULE,
                toolgate::flow::TAINTED_SINK_RULE,
                toolgate::flow::TRIFECTA_RULE,
            ]
            .map(String::from),
        )
        .collect();
    let default = Arc::new(default);
    let rt = Runtime::start(&default, None, true);

    let mut failures = Vec::new();
    let mut kinds = Kinds::default();
    for block in &blocks {
        let name = block.name();
        let node = match parse_yaml(&block.at_readme_lines(&[])) {
            Ok(n) => n,
            Err(e) => {
                failures.push(format!("{name}: README.md: {e}"));
                continue;
            }
        };
        match &node.value {
            NodeValue::Seq(_) => {
                kinds.scenario_lists += 1;
                let cases = match parse_cases(&block.at_readme_lines(&[])) {
                    Ok(c) => c,
                    Err(e) => {
                        failures.push(format!("{name}: {e}"));
                        continue;
                    }
                };
                let foreign: Vec<&str> = named_rules(&cases)
                    .into_iter()
                    .filter(|id| !default_rules.contains(*id))
                    .collect();
                let mut report = Report::default();
                if foreign.is_empty() {
                    kinds.scenarios_run += 1;
                    run_cases(&name, cases, &default, &rt, &mut report).await;
                } else {
                    // Written for another pack: the events must still be valid.
                    for case in cases {
                        let case_name = case.name.clone();
                        let events = case.into_steps().and_then(|steps| {
                            steps
                                .into_iter()
                                .try_for_each(|(e, _)| e.into_event().map(drop))
                        });
                        if let Err(e) = events {
                            report.failed += 1;
                            report
                                .failures
                                .push(format!("{name}: {case_name}: bad event: {e}"));
                        }
                    }
                }
                failures.extend(report.failures);
            }
            NodeValue::Map(_) => {
                let has = |k: &str| keys(&node).contains(&k);
                let text = if has("policy_pack") {
                    kinds.packs += 1;
                    block.at_readme_lines(&[])
                } else {
                    kinds.fragments += 1;
                    let mut header = vec![FRAGMENT_NAME];
                    if !has("version") {
                        header.push(FRAGMENT_VERSION);
                    }
                    block.at_readme_lines(&header)
                };
                // The pack as served, and with each of its environment overlays (`--env`).
                let envs = node.get("environments").map(keys).unwrap_or_default();
                for env in std::iter::once(None).chain(envs.into_iter().map(Some)) {
                    if let Err(e) = compile(&text, "README.md", env) {
                        let env = env.map(|e| format!(" with --env {e}")).unwrap_or_default();
                        failures.push(format!("{name}{env}: does not compile:\n{e}"));
                    }
                }
            }
            _ => failures.push(format!(
                "{name}: neither a policy pack, a pack fragment nor a scenario list"
            )),
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    // Each kind README is known to show was seen and checked, so an extractor or classifier
    // bug cannot pass by skipping them.
    assert!(
        kinds.packs >= 1
            && kinds.fragments >= 1
            && kinds.scenario_lists >= 1
            && kinds.scenarios_run >= 1,
        "{kinds:?}"
    );
}

#[test]
fn the_extractor_finds_yaml_blocks_only_and_keeps_their_lines() {
    let md = "# t\n\n```sh\n```yaml\nnot: this\n```\n\ntext\n\n```yaml\na: 1\nb: [x]\n```\n\n- item\n\n  ```yaml\n  - c: 2\n  ```\n```json\n{}\n```\n";
    let blocks = yaml_blocks(md);
    let texts: Vec<&str> = blocks.iter().map(|b| b.text.as_str()).collect();
    assert_eq!(texts, ["a: 1\nb: [x]\n", "- c: 2\n"]);
    assert_eq!(blocks[0].name(), "README.md yaml block 1 (line 11: `a: 1`)");
    assert_eq!(blocks[1].index, 2);
    let padded = blocks[0].at_readme_lines(&[FRAGMENT_NAME]);
    assert_eq!(padded.lines().nth(10), Some("a: 1"));
    assert_eq!(padded.lines().next(), Some(FRAGMENT_NAME));
}

/// A block that does not validate fails the test naming the block and the README line.
#[test]
fn a_broken_fragment_is_named_by_its_readme_line() {
    let block = Block {
        index: 7,
        fence: 40,
        text: "sync_rules:\n  - id: no-such-rule\n".into(),
    };
    let text = block.at_readme_lines(&[FRAGMENT_NAME, FRAGMENT_VERSION]);
    let err = compile(&text, "README.md", None).unwrap_err().to_string();
    assert!(
        err.contains("README.md:43: sync_rules[0].id: unknown rule id `no-such-rule`"),
        "{err}"
    );
    assert_eq!(
        block.name(),
        "README.md yaml block 7 (line 42: `sync_rules:`)"
    );
}
