//! Information flow per session. Untrusted content (tool results, tool messages) leaves its
//! destination-like values in the session's provenance; a call to a sink (a tool that acts
//! outward) is then judged by where its destinations came from, by whether the session saw
//! an injection signal, and by the pack's flow rules. This is what stops an attacker's
//! *action*: a mail to an address that only the attacker's text named.

pub mod path;
pub mod provenance;
pub mod values;

use crate::decision::{Action, RiskLevel, RuleHit};
use crate::event::{Event, EventKind};
use crate::glob::Glob;
use path::ArgPath;
use provenance::{Provenance, Source, Standing};
use values::{Value, ValueKind};

/// Rule ids of the flow stage's own hits.
pub const UNTRUSTED_DESTINATION_RULE: &str = "untrusted-destination";
pub const TAINTED_SINK_RULE: &str = "tainted-sink";
pub const TRIFECTA_RULE: &str = "lethal-trifecta";
pub const FLOW_TAG: &str = "flow";

/// Destination values read from one sink call at most.
const MAX_DESTINATIONS: usize = 64;
/// Values recorded from one untrusted event at most; more marks the record incomplete.
const MAX_VALUES_PER_EVENT: usize = 256;
/// Bytes of one untrusted event read for values. Larger content is read this far and the
/// record marked incomplete, so a value hidden past the end is treated as untrusted, never
/// as unseen.
const MAX_READ_BYTES: usize = 1 << 20;

/// Words of user messages trusted as names (`#general`, `Fred`) per session.
const MAX_TRUSTED_WORDS: usize = 256;

/// Hit tags that count as an injection signal.
const INJECTION_TAGS: &[&str] = &["prompt-injection", "prompt_injection", "jailbreak"];

/// A tool that acts outward, and where its calls name their destinations.
#[derive(Debug, Clone)]
pub struct Sink {
    pub tools: Vec<Glob>,
    /// Empty: every argument is read for destination-like values.
    pub destinations: Vec<ArgPath>,
}

/// What a flow rule's source must have shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Injection,
    Pii,
    Secret,
    Any,
}

impl When {
    pub fn parse(s: &str) -> Option<When> {
        Some(match s {
            "injection" => When::Injection,
            "pii" => When::Pii,
            "secret" | "secrets" => When::Secret,
            "any" => When::Any,
            _ => return None,
        })
    }
}

/// `flows:` in a pack: an event of one kind, then within N events a call of another.
#[derive(Debug, Clone)]
pub struct FlowRule {
    pub id: String,
    /// Event-kind bits (`EventKind::bit`).
    pub from_events: u8,
    /// Empty: any tool (or none, for prompts).
    pub from_tools: Vec<Glob>,
    pub when: Vec<When>,
    pub to_tools: Vec<Glob>,
    /// The call matches only when each of these paths holds a value.
    pub to_args: Vec<ArgPath>,
    pub action: Action,
    pub level: RiskLevel,
    /// The call must come at most this many events after the source; `None`: any time in
    /// the session.
    pub within: Option<u32>,
}

/// The compiled `provenance:`, `sinks:` and `flows:` sections.
#[derive(Debug, Clone)]
pub struct FlowConfig {
    pub sinks: Vec<Sink>,
    pub flows: Vec<FlowRule>,
    pub untrusted_tools: Vec<Glob>,
    pub trusted_tools: Vec<Glob>,
    /// Message roles in prompts whose content is untrusted (tool output pasted back).
    pub untrusted_roles: Vec<String>,
    /// Results of these tools count as private data read, whatever rules hit.
    pub private_tools: Vec<Glob>,
    /// Destinations always trusted: globs over normalized values (`*@acme.example`).
    pub allow: Vec<Glob>,
    pub untrusted_destination: Action,
    pub tainted_sink: Action,
    pub trifecta: Action,
    /// Untrusted values kept per session.
    pub max_values: usize,
    /// Trusted values kept per session.
    pub max_trusted: usize,
    /// Every sink and flow-target glob in one automaton (built by `finish`): most calls
    /// are to no sink, and one pass over the tool name says so.
    watched: Option<regex::Regex>,
}

impl Default for FlowConfig {
    fn default() -> Self {
        FlowConfig {
            sinks: Vec::new(),
            flows: Vec::new(),
            untrusted_tools: vec![Glob::new("*")],
            trusted_tools: Vec::new(),
            untrusted_roles: vec!["tool".into(), "function".into()],
            private_tools: Vec::new(),
            allow: Vec::new(),
            untrusted_destination: Action::Pause,
            tainted_sink: Action::Pause,
            trifecta: Action::Pause,
            max_values: 512,
            max_trusted: 256,
            watched: None,
        }
    }
}

fn any(globs: &[Glob], name: &str) -> bool {
    globs.iter().any(|g| g.matches(name))
}

impl FlowConfig {
    /// True when nothing in the pack reads or writes provenance: the stage is skipped.
    pub fn is_off(&self) -> bool {
        self.sinks.is_empty() && self.flows.is_empty()
    }

    fn sink(&self, tool: &str) -> Option<&Sink> {
        self.sinks.iter().find(|s| any(&s.tools, tool))
    }

    /// Whether this event's content is untrusted as a whole (a tool result).
    fn untrusted_result(&self, event: &Event) -> bool {
        event.kind == EventKind::ToolCallResult
            && any(&self.untrusted_tools, &event.tool_name)
            && !any(&self.trusted_tools, &event.tool_name)
    }

    fn allowed(&self, v: &Value) -> bool {
        self.allow.iter().any(|g| g.matches(&v.text))
    }

    /// Builds the matcher `watches_call` uses; call once the sinks and flows are set.
    pub fn finish(&mut self) {
        let sources: Vec<String> = self
            .sinks
            .iter()
            .flat_map(|s| &s.tools)
            .chain(self.flows.iter().flat_map(|f| &f.to_tools))
            .map(Glob::regex_source)
            .collect();
        // A matcher that fails to build (an absurd number of globs) leaves the glob-by-glob
        // test in place: slower, same answer.
        self.watched = if sources.is_empty() {
            None
        } else {
            regex::Regex::new(&sources.join("|")).ok()
        };
    }

    /// Whether a sink or flow rule might apply to this call: the cheap test that keeps the
    /// stage off the path of every other tool call.
    pub fn watches_call(&self, tool: &str) -> bool {
        match &self.watched {
            Some(re) => re.is_match(tool),
            None => self.sink(tool).is_some() || self.flows.iter().any(|f| any(&f.to_tools, tool)),
        }
    }
}

/// Hits for a tool call from the session's provenance: destinations that only untrusted
/// content named, a session tainted by an injection signal, the lethal trifecta, and the
/// pack's flow rules.
pub fn check(event: &Event, cfg: &FlowConfig, prov: &Provenance) -> Vec<RuleHit> {
    let mut hits = Vec::new();
    let tool = &event.tool_name;
    if event.kind != EventKind::ToolCallStart || !cfg.watches_call(tool) {
        return hits;
    }
    if let Some(sink) = cfg.sink(tool) {
        sink_hits(event, sink, cfg, prov, &mut hits);
    }
    for (i, f) in cfg.flows.iter().enumerate() {
        if !any(&f.to_tools, tool) || !has_args(event, &f.to_args) {
            continue;
        }
        let Some(src) = prov.flow_mark(i) else {
            continue;
        };
        // `seq` is the number of the last recorded event; this call is the next one.
        let distance = prov.seq.saturating_add(1).saturating_sub(src.seq);
        if f.within.is_some_and(|w| distance > w) {
            continue;
        }
        hits.push(
            RuleHit::new(
                &f.id,
                f.action,
                f.level,
                format!(
                    "flow rule `{}`: `{tool}` called {distance} events after {}",
                    f.id,
                    src.describe()
                ),
            )
            .tagged(FLOW_TAG),
        );
    }
    hits
}

fn has_args(event: &Event, paths: &[ArgPath]) -> bool {
    let Some(args) = &event.arguments else {
        return paths.is_empty();
    };
    paths.iter().all(|p| {
        let mut out = Vec::new();
        p.texts(args, &mut out);
        out.iter().any(|t| !t.trim().is_empty())
    })
}

fn sink_hits(
    event: &Event,
    sink: &Sink,
    cfg: &FlowConfig,
    prov: &Provenance,
    hits: &mut Vec<RuleHit>,
) {
    let tool = &event.tool_name;
    let dests = destinations(event, sink);
    let mut untrusted: Option<(Value, Option<Source>)> = None;
    let mut unknown: Option<Value> = None;
    let mut all_trusted = !dests.is_empty();
    for v in dests {
        if cfg.allowed(&v) {
            continue;
        }
        match prov.standing(v.key()) {
            Standing::Trusted => {}
            Standing::Untrusted(src) => {
                all_trusted = false;
                untrusted.get_or_insert((v, src));
            }
            Standing::Unknown => {
                all_trusted = false;
                unknown.get_or_insert(v);
            }
            Standing::Unseen => all_trusted = false,
        }
    }
    if cfg.untrusted_destination > Action::Allow {
        // Values are named by kind only: the hit goes into decisions and logs, and an
        // attacker's address there would be one more place it travels.
        let reason = match (&untrusted, &unknown) {
            (Some((v, Some(src))), _) => Some(format!(
                "`{tool}` sends to {} that appeared only in untrusted content: {}, never in the task or a user message",
                v.kind.as_str(),
                src.describe()
            )),
            (Some((v, None)), _) => Some(format!(
                "`{tool}` sends to {} that appeared only in untrusted content earlier in this session, never in the task or a user message",
                v.kind.as_str()
            )),
            (None, Some(v)) => Some(format!(
                "`{tool}` sends to {} whose origin is unknown: this session's provenance record is full, so it may have come from untrusted content",
                v.kind.as_str()
            )),
            (None, None) => None,
        };
        if let Some(reason) = reason {
            hits.push(
                RuleHit::new(
                    UNTRUSTED_DESTINATION_RULE,
                    cfg.untrusted_destination,
                    RiskLevel::High,
                    reason,
                )
                .tagged(FLOW_TAG),
            );
        }
    }
    if cfg.tainted_sink > Action::Allow
        && let Some(src) = &prov.injection
    {
        hits.push(
            RuleHit::new(
                TAINTED_SINK_RULE,
                cfg.tainted_sink,
                RiskLevel::High,
                format!(
                    "`{tool}` acts outward after an injection signal in this session: {}",
                    src.describe()
                ),
            )
            .tagged(FLOW_TAG),
        );
    }
    if cfg.trifecta > Action::Allow
        && !all_trusted
        && let (Some(private), Some(untrusted_src)) = (&prov.private_read, &prov.untrusted_seen)
    {
        hits.push(
            RuleHit::new(
                TRIFECTA_RULE,
                cfg.trifecta,
                RiskLevel::High,
                format!(
                    "lethal trifecta: this session read private data ({}) and untrusted content ({}), and `{tool}` now sends to a destination the user did not name",
                    private.describe(),
                    untrusted_src.describe()
                ),
            )
            .tagged(FLOW_TAG),
        );
    }
}

/// The destination values of a sink call: from its declared paths when any is present,
/// else from every argument, so a renamed argument does not slip past.
fn destinations(event: &Event, sink: &Sink) -> Vec<Value> {
    let Some(args) = &event.arguments else {
        return Vec::new();
    };
    let mut texts = Vec::new();
    for p in &sink.destinations {
        p.texts(args, &mut texts);
    }
    let mut out = Vec::new();
    if texts.is_empty() {
        let mut all = Vec::new();
        ArgPath::root().texts(args, &mut all);
        for t in &all {
            if out.len() >= MAX_DESTINATIONS {
                break;
            }
            values::extract(t, MAX_DESTINATIONS - out.len(), &mut out);
        }
        return out;
    }
    for t in &texts {
        if out.len() >= MAX_DESTINATIONS {
            break;
        }
        out.extend(values::destination(t, MAX_DESTINATIONS - out.len()));
    }
    out
}

/// Signals one decided event leaves on the session.
#[derive(Debug, Clone, Copy, Default)]
pub struct Signals {
    pub injection: bool,
    pub pii: bool,
    pub secret: bool,
}

impl Signals {
    pub fn of(hits: &[RuleHit]) -> Signals {
        let mut s = Signals::default();
        for h in hits {
            s.add(&Signals::of_tags(&h.policy_tags));
        }
        s
    }

    pub fn of_tags(tags: &[String]) -> Signals {
        let has = |set: &[&str]| tags.iter().any(|t| set.contains(&t.as_str()));
        Signals {
            injection: has(INJECTION_TAGS),
            pii: has(&["pii"]),
            secret: has(&["secrets", "secret"]),
        }
    }

    fn add(&mut self, o: &Signals) {
        self.injection |= o.injection;
        self.pii |= o.pii;
        self.secret |= o.secret;
    }

    fn private(&self) -> bool {
        self.pii || self.secret
    }
}

/// Records what a decided event tells the session: trusted values from the task and user
/// messages, untrusted values and signals from tool output, and flow-rule sources.
pub fn record(event: &Event, cfg: &FlowConfig, prov: &mut Provenance, signals: Signals) {
    let seq = prov.next_event();
    let source = || Source::new(seq, event.kind, &event.tool_name, &event.context.step_id);
    let goal = &event.context.task_goal;
    if !goal.is_empty() && prov.goal_changed(quick_hash(goal)) {
        trust(goal, cfg, prov);
    }
    let mut untrusted_text: Vec<&str> = Vec::new();
    match event.kind {
        EventKind::LlmBefore => {
            for m in &event.messages {
                if cfg.untrusted_roles.iter().any(|r| r == &m.role) {
                    untrusted_text.push(&m.content);
                } else if m.role == "user" || m.role == "system" {
                    trust(&m.content, cfg, prov);
                }
            }
        }
        EventKind::ToolCallResult if cfg.untrusted_result(event) => {
            untrusted_text.push(&event.output);
        }
        _ => {}
    }
    let untrusted = !untrusted_text.is_empty();
    if untrusted {
        let mut found = Vec::new();
        let mut truncated = false;
        for t in untrusted_text {
            let read = crate::text::head(t, MAX_READ_BYTES);
            truncated |= read.len() < t.len();
            let room = MAX_VALUES_PER_EVENT.saturating_sub(found.len());
            truncated |= values::extract(read, room, &mut found);
        }
        let keys: Vec<(u64, ValueKind)> = found.iter().map(|v| (v.key(), v.kind)).collect();
        prov.add_untrusted(source(), &keys, truncated, cfg.max_values);
    }
    // A trusted tool's result can be poisoned too (a contact card, a shared document): an
    // injection signal on any result taints the session.
    if signals.injection && (untrusted || event.kind == EventKind::ToolCallResult) {
        prov.injection = Some(source());
    }
    let private_tool =
        event.kind == EventKind::ToolCallResult && any(&cfg.private_tools, &event.tool_name);
    if (event.kind == EventKind::ToolCallResult && signals.private()) || private_tool {
        prov.private_read = Some(source());
    }
    let n = cfg.flows.len();
    for (i, f) in cfg.flows.iter().enumerate() {
        if f.from_events & event.kind.bit() == 0 {
            continue;
        }
        if !f.from_tools.is_empty() && !any(&f.from_tools, &event.tool_name) {
            continue;
        }
        let shown = f.when.iter().any(|w| match w {
            When::Any => true,
            When::Injection => signals.injection,
            When::Pii => signals.pii,
            When::Secret => signals.secret,
        });
        if shown {
            prov.mark_flow(i, n, source());
        }
    }
}

/// An injection verdict that arrived after its event was decided still taints the session.
pub fn record_late_injection(prov: &mut Provenance, source: Source) {
    prov.injection = Some(source);
}

fn trust(text: &str, cfg: &FlowConfig, prov: &mut Provenance) {
    let mut found = Vec::new();
    values::extract(
        crate::text::head(text, MAX_READ_BYTES),
        MAX_VALUES_PER_EVENT,
        &mut found,
    );
    for v in &found {
        prov.add_trusted(v.key(), cfg.max_trusted);
    }
    // A name the user wrote (`post it in #general`) is trusted as a whole word too.
    for w in text.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '"' | '\'')) {
        let w = w.trim_end_matches(['.', '!', '?', ':']);
        if (2..=64).contains(&w.len())
            && let Some(v) = values::name(w)
        {
            prov.add_trusted_word(v.key(), MAX_TRUSTED_WORDS);
        }
    }
}

fn quick_hash(s: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests;
