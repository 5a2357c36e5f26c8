//! The fast rule set: every regex compiled once per policy, one Aho-Corasick pass over each
//! field finds which anchored patterns can match, a RegexSet pass screens the unanchored
//! ones, and only those candidates run their regex. All inside one time box.

use std::sync::Arc;
use std::time::Instant;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::{Regex, RegexSet, RegexSetBuilder};

use crate::decision::{Action, Effects, RiskLevel};
use crate::event::{Event, EventKind, Field, FieldKind, Normalized};
use crate::glob::Glob;
use crate::rules::Validator;
use crate::rules::validate;

/// Fields above this size are scanned in overlapping windows so the time box is checked
/// while a large input is being read, not only after it.
const WINDOW: usize = 64 * 1024;
/// Overlap between windows: a match up to this long that crosses a window edge is still found
/// whole in the next window.
const WINDOW_OVERLAP: usize = 4 * 1024;

/// A rule ready to run.
#[derive(Debug, Clone)]
pub struct CompiledRule {
    pub id: String,
    /// Bit set of `EventKind::bit`.
    pub events: u8,
    /// Bit set of `FieldKind::bit`.
    pub fields: u8,
    /// Message roles in scope (empty: all).
    pub roles: Vec<String>,
    /// Tools in scope (empty: all).
    pub tools: Vec<Glob>,
    pub action: Action,
    pub level: RiskLevel,
    pub reason: String,
    pub guidance: Option<String>,
    pub reversible: bool,
    pub tags: Vec<String>,
    pub violated_policy_ids: Vec<String>,
    /// `None`: `[REDACTED:<kind>]`.
    pub replacement: Option<String>,
    pub effects: Effects,
    pub matcher: RuleMatcher,
}

impl CompiledRule {
    pub fn applies_to(&self, kind: EventKind, tool: &str) -> bool {
        self.events & kind.bit() != 0
            && (self.tools.is_empty() || self.tools.iter().any(|g| g.matches(tool)))
    }

    fn field_in_scope(&self, f: &Field<'_>) -> bool {
        // Redacting rules never look at the joined argument view: a redaction must name a
        // real JSON leaf, and every leaf is scanned on its own anyway.
        if f.kind == FieldKind::ArgumentsJoined && self.action == Action::Redact {
            return false;
        }
        let bit = if f.kind == FieldKind::ArgumentsJoined {
            FieldKind::Arguments.bit() | FieldKind::ArgumentsJoined.bit()
        } else {
            f.kind.bit()
        };
        if self.fields & bit == 0 {
            return false;
        }
        match (f.role, self.roles.is_empty()) {
            (Some(role), false) => self.roles.iter().any(|r| r.eq_ignore_ascii_case(role)),
            _ => true,
        }
    }
}

#[derive(Debug, Clone)]
pub enum RuleMatcher {
    /// Indices into `FastRuleSet::patterns`.
    Patterns,
    ToolAccess {
        allow: Vec<Glob>,
        deny: Vec<Glob>,
    },
    PlanLimit {
        max_actions: usize,
    },
}

#[derive(Debug, Clone)]
pub struct CompiledPattern {
    pub rule: usize,
    pub kind: String,
    pub regex: Regex,
    pub group: usize,
    pub validator: Validator,
    pub allow_emails: Arc<[String]>,
    pub anchored: bool,
}

/// Input to `FastRuleSet::build`: one pattern before the shared automata exist.
#[derive(Debug, Clone)]
pub struct PatternInput {
    pub rule: usize,
    pub kind: String,
    pub regex: Regex,
    pub group: usize,
    pub validator: Validator,
    pub allow_emails: Arc<[String]>,
    /// Lowercase ASCII-insensitive literals; empty means unanchored.
    pub anchors: Vec<String>,
}

#[derive(Debug)]
pub struct FastRuleSet {
    pub rules: Vec<CompiledRule>,
    pub patterns: Vec<CompiledPattern>,
    /// All anchors of all patterns, matched ASCII-case-insensitively.
    anchors: Option<AhoCorasick>,
    /// Anchor id → pattern indices.
    anchor_patterns: Vec<Vec<u32>>,
    /// Unanchored pattern indices, and a set over them to screen a field in one pass.
    unanchored: Vec<u32>,
    unanchored_set: Option<RegexSet>,
}

/// One confirmed match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldMatch {
    pub rule: usize,
    pub pattern: Option<usize>,
    /// Index into the event's `fields()`.
    pub field: usize,
    /// Byte range in the original field text.
    pub start: usize,
    pub end: usize,
}

/// What a scan found.
#[derive(Debug, Default)]
pub struct ScanOutcome {
    pub matches: Vec<FieldMatch>,
    /// Rules whose scope applied to this event (for `rules_evaluated`).
    pub rules_evaluated: u32,
    /// True when the time box ran out before the scan finished.
    pub overrun: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("cannot build the anchor automaton: {0}")]
    Anchors(#[from] aho_corasick::BuildError),
    #[error("cannot build the unanchored regex set: {0}")]
    Set(#[from] regex::Error),
}

impl FastRuleSet {
    pub fn build(
        rules: Vec<CompiledRule>,
        inputs: Vec<PatternInput>,
    ) -> Result<FastRuleSet, BuildError> {
        let mut patterns = Vec::with_capacity(inputs.len());
        let mut anchor_lits: Vec<String> = Vec::new();
        let mut anchor_patterns: Vec<Vec<u32>> = Vec::new();
        let mut unanchored = Vec::new();
        let mut unanchored_src = Vec::new();
        for (i, p) in inputs.into_iter().enumerate() {
            let idx = i as u32;
            if p.anchors.is_empty() {
                unanchored.push(idx);
                unanchored_src.push(p.regex.as_str().to_string());
            }
            for a in &p.anchors {
                let a = a.to_ascii_lowercase();
                match anchor_lits.iter().position(|x| *x == a) {
                    Some(pos) => anchor_patterns[pos].push(idx),
                    None => {
                        anchor_lits.push(a);
                        anchor_patterns.push(vec![idx]);
                    }
                }
            }
            patterns.push(CompiledPattern {
                rule: p.rule,
                kind: p.kind,
                anchored: !p.anchors.is_empty(),
                regex: p.regex,
                group: p.group,
                validator: p.validator,
                allow_emails: p.allow_emails,
            });
        }
        let anchors = if anchor_lits.is_empty() {
            None
        } else {
            Some(
                AhoCorasickBuilder::new()
                    .ascii_case_insensitive(true)
                    .match_kind(MatchKind::Standard)
                    .build(&anchor_lits)?,
            )
        };
        // Each pattern's regex already carries its own flags inline (compile.rs prefixes
        // `(?i)` where needed), so the set needs no flags of its own.
        let unanchored_set = if unanchored_src.is_empty() {
            None
        } else {
            Some(
                RegexSetBuilder::new(&unanchored_src)
                    .size_limit(64 << 20)
                    .dfa_size_limit(16 << 20)
                    .build()?,
            )
        };
        Ok(FastRuleSet {
            rules,
            patterns,
            anchors,
            anchor_patterns,
            unanchored,
            unanchored_set,
        })
    }

    /// Scans the event's fields. `active` says which rules apply to this event (scope by
    /// event kind and tool); `deadline` is the time box.
    pub fn scan(
        &self,
        event: &Event,
        fields: &[Field<'_>],
        deadline: Instant,
        out: &mut ScanOutcome,
    ) {
        let active: Vec<bool> = self
            .rules
            .iter()
            .map(|r| r.applies_to(event.kind, &event.tool_name))
            .collect();
        out.rules_evaluated = active.iter().filter(|a| **a).count() as u32;

        // Structural rules first: they are O(1) and decide on names, not text.
        for (ri, rule) in self.rules.iter().enumerate() {
            if !active[ri] {
                continue;
            }
            match &rule.matcher {
                RuleMatcher::Patterns => {}
                RuleMatcher::ToolAccess { allow, deny } => {
                    if event.kind == EventKind::ToolCallStart || event.kind == EventKind::LlmBefore
                    {
                        for (fi, f) in fields.iter().enumerate() {
                            let is_tool = match f.kind {
                                FieldKind::ToolName => true,
                                FieldKind::Plan => f.path.ends_with(".tool_name"),
                                _ => false,
                            };
                            if !is_tool {
                                continue;
                            }
                            let name = f.text.as_ref();
                            let denied = deny.iter().any(|g| g.matches(name))
                                || (!allow.is_empty() && !allow.iter().any(|g| g.matches(name)));
                            if denied {
                                out.matches.push(FieldMatch {
                                    rule: ri,
                                    pattern: None,
                                    field: fi,
                                    start: 0,
                                    end: name.len(),
                                });
                            }
                        }
                    }
                }
                RuleMatcher::PlanLimit { max_actions } => {
                    if event.plan.len() > *max_actions {
                        out.matches.push(FieldMatch {
                            rule: ri,
                            pattern: None,
                            field: usize::MAX,
                            start: 0,
                            end: 0,
                        });
                    }
                }
            }
        }

        // Which patterns could run at all on this event.
        let pattern_active: Vec<bool> = self
            .patterns
            .iter()
            .map(|p| active[p.rule] && matches!(self.rules[p.rule].matcher, RuleMatcher::Patterns))
            .collect();
        if !pattern_active.iter().any(|a| *a) {
            return;
        }

        let mut candidate = vec![false; self.patterns.len()];
        for (fi, field) in fields.iter().enumerate() {
            if Instant::now() >= deadline {
                out.overrun = true;
                return;
            }
            // Skip the field early when no active pattern's rule looks at it.
            let in_scope: Vec<bool> = self
                .patterns
                .iter()
                .enumerate()
                .map(|(pi, p)| pattern_active[pi] && self.rules[p.rule].field_in_scope(field))
                .collect();
            if !in_scope.iter().any(|a| *a) {
                continue;
            }
            let text = field.text.as_ref();
            let mut start = 0;
            loop {
                let end = window_end(text, start);
                let window = &text[start..end];
                if !self.scan_window(fi, window, start, &in_scope, &mut candidate, deadline, out) {
                    out.overrun = true;
                    return;
                }
                if end >= text.len() {
                    break;
                }
                if Instant::now() >= deadline {
                    out.overrun = true;
                    return;
                }
                start = window_start(text, end);
            }
        }
        // Windows overlap: the same match may be reported twice.
        out.matches
            .sort_by_key(|m| (m.field, m.start, m.end, m.rule, m.pattern));
        out.matches.dedup();
    }

    /// Scans one window of one field; returns false on time-box overrun.
    #[allow(clippy::too_many_arguments)]
    fn scan_window(
        &self,
        field: usize,
        original: &str,
        base: usize,
        in_scope: &[bool],
        candidate: &mut [bool],
        deadline: Instant,
        out: &mut ScanOutcome,
    ) -> bool {
        let norm = Normalized::new(original);
        let text = norm.text.as_ref();
        candidate.iter_mut().for_each(|c| *c = false);
        let mut any = false;
        if let Some(ac) = &self.anchors {
            for m in ac.find_overlapping_iter(text) {
                for &pi in &self.anchor_patterns[m.pattern().as_usize()] {
                    let pi = pi as usize;
                    if in_scope[pi] && !candidate[pi] {
                        candidate[pi] = true;
                        any = true;
                    }
                }
            }
        }
        if let Some(set) = &self.unanchored_set
            && self.unanchored.iter().any(|&pi| in_scope[pi as usize])
        {
            for si in set.matches(text).iter() {
                let pi = self.unanchored[si] as usize;
                if in_scope[pi] {
                    candidate[pi] = true;
                    any = true;
                }
            }
        }
        if !any {
            return true;
        }
        for (pi, p) in self.patterns.iter().enumerate() {
            if !candidate[pi] {
                continue;
            }
            if Instant::now() >= deadline {
                return false;
            }
            for caps in p.regex.captures_iter(text) {
                let Some(m) = caps.get(p.group).or_else(|| caps.get(0)) else {
                    continue;
                };
                if m.is_empty() {
                    continue;
                }
                if !validate::check(p.validator, m.as_str(), &p.allow_emails) {
                    continue;
                }
                let (s, e) = norm.original_range(m.start(), m.end());
                out.matches.push(FieldMatch {
                    rule: p.rule,
                    pattern: Some(pi),
                    field,
                    start: base + s,
                    end: base + e,
                });
            }
        }
        true
    }
}

fn window_end(text: &str, start: usize) -> usize {
    let mut end = (start + WINDOW).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

fn window_start(text: &str, prev_end: usize) -> usize {
    let mut s = prev_end.saturating_sub(WINDOW_OVERLAP);
    while !text.is_char_boundary(s) {
        s += 1;
    }
    s
}
