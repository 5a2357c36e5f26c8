//! The domain event (no protobuf): what the agent reported, normalized once, with field views
//! that carry JSON paths so a match can be traced back to the exact bytes it came from.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::canonical_combining_class;

/// The four moments toolgate is asked about.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    LlmBefore,
    ToolCallStart,
    ToolCallResult,
    LlmStreamChunk,
}

impl EventKind {
    pub const ALL: [EventKind; 4] = [
        EventKind::LlmBefore,
        EventKind::ToolCallStart,
        EventKind::ToolCallResult,
        EventKind::LlmStreamChunk,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::LlmBefore => "llm_before",
            EventKind::ToolCallStart => "tool_call_start",
            EventKind::ToolCallResult => "tool_call_result",
            EventKind::LlmStreamChunk => "llm_stream_chunk",
        }
    }

    pub fn parse(s: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Bit for compact event sets in compiled rules.
    pub fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Longest session, step and tenant id an edge accepts: they key state kept in memory.
pub const MAX_ID_BYTES: usize = 256;
/// Longest tool name the GuardService accepts (MCP suggests names of at most 128 characters).
pub const MAX_TOOL_NAME_BYTES: usize = 512;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    pub session_id: String,
    pub step_id: String,
    pub tenant: String,
    pub task_goal: String,
    pub labels: BTreeMap<String, String>,
    /// The verified identity of whoever sent the event (an mTLS SPIFFE ID or DNS name, or
    /// `unix:uid=N` on the Unix socket); empty when the connection proved none. Set by the
    /// edge from the connection, never from the request body.
    pub caller: String,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlannedAction {
    pub tool_name: String,
    pub arguments: Option<Value>,
}

/// One event, already parsed and validated at the edge.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub kind: EventKind,
    pub context: Context,
    pub tool_name: String,
    /// Parsed `arguments_json`; `None` when the caller sent none.
    pub arguments: Option<Value>,
    /// `arguments_json` as the caller sent it, when the edge had it as text. The decision
    /// log takes this one string to its thread instead of the parsed tree (see
    /// `telemetry::spool::Record::new`). Rules never read it.
    pub arguments_text: Option<String>,
    pub output: String,
    pub is_error: bool,
    pub messages: Vec<Message>,
    pub plan: Vec<PlannedAction>,
    /// Streamed text under inspection (`llm_stream_chunk` only).
    pub chunk: String,
    /// A resubmitted call's approval (`tool_call_start` only); empty otherwise.
    pub pause_id: String,
}

impl Event {
    pub fn new(kind: EventKind, context: Context) -> Event {
        Event {
            kind,
            context,
            tool_name: String::new(),
            arguments: None,
            arguments_text: None,
            output: String::new(),
            is_error: false,
            messages: Vec::new(),
            plan: Vec::new(),
            chunk: String::new(),
            pause_id: String::new(),
        }
    }

    /// Every piece of text a rule may look at, in a fixed order (so decisions are
    /// deterministic), each with the path a redaction names.
    pub fn fields(&self) -> Vec<Field<'_>> {
        let mut out = Vec::new();
        if !self.tool_name.is_empty() {
            out.push(Field::borrowed(
                FieldKind::ToolName,
                "tool_name".into(),
                &self.tool_name,
            ));
        }
        if let Some(args) = &self.arguments {
            let start = out.len();
            walk_leaves(args, &mut "$".to_string(), &mut |path, text, part| {
                out.push(Field {
                    kind: FieldKind::Arguments,
                    path,
                    text,
                    role: None,
                    part,
                });
            });
            // Shell-like tools often split one command over several leaves
            // (`{"cmd":"rm","args":["-rf","/"]}`); a joined view lets command rules see
            // it whole. It is never redacted: redactions always name a real leaf. Long
            // leaves (scripts, documents) are scanned on their own and left out of it.
            if let Some(joined) = joined_view(&out[start..]) {
                out.push(Field {
                    kind: FieldKind::ArgumentsJoined,
                    path: "$".into(),
                    text: Cow::Owned(joined),
                    role: None,
                    part: Part::Value,
                });
            }
            // Code that runs a program from an argv list (`subprocess.run(['rm', '-rf',
            // p])`, `spawn("git", ["push", "--force"])`) names the command in pieces; the
            // command line those pieces make is what command rules must read.
            let argv: Vec<String> = out[start..]
                .iter()
                .filter(|f| f.kind == FieldKind::Arguments && f.part == Part::Value)
                .filter_map(|f| argv_lines(&f.text))
                .collect();
            if !argv.is_empty() {
                out.push(Field {
                    kind: FieldKind::ArgumentsJoined,
                    path: "$".into(),
                    text: Cow::Owned(argv.join("\n")),
                    role: None,
                    part: Part::Value,
                });
            }
        }
        if !self.output.is_empty() {
            out.push(Field::borrowed(
                FieldKind::Output,
                "output".into(),
                &self.output,
            ));
        }
        for (i, m) in self.messages.iter().enumerate() {
            out.push(Field {
                kind: FieldKind::Messages,
                path: format!("messages[{i}].content"),
                text: Cow::Borrowed(&m.content),
                role: Some(m.role.as_str()),
                part: Part::Value,
            });
        }
        for (i, p) in self.plan.iter().enumerate() {
            out.push(Field::borrowed(
                FieldKind::Plan,
                format!("plan[{i}].tool_name"),
                &p.tool_name,
            ));
            if let Some(args) = &p.arguments {
                let mut prefix = format!("plan[{i}].arguments$");
                let start = out.len();
                walk_leaves(args, &mut prefix, &mut |path, text, part| {
                    out.push(Field {
                        kind: FieldKind::Plan,
                        path,
                        text,
                        role: None,
                        part,
                    });
                });
                // The same joined view as for call arguments, per planned action.
                if let Some(joined) = joined_view(&out[start..]) {
                    out.push(Field {
                        kind: FieldKind::ArgumentsJoined,
                        path: format!("plan[{i}].arguments$"),
                        text: Cow::Owned(joined),
                        role: None,
                        part: Part::Value,
                    });
                }
            }
        }
        if !self.chunk.is_empty() {
            out.push(Field::borrowed(
                FieldKind::Chunk,
                "chunk".into(),
                &self.chunk,
            ));
        }
        out
    }
}

/// Which part of an event a field comes from; rules are scoped by these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FieldKind {
    ToolName,
    Arguments,
    ArgumentsJoined,
    Output,
    Messages,
    Plan,
    Chunk,
}

impl FieldKind {
    pub const ALL: [FieldKind; 7] = [
        FieldKind::ToolName,
        FieldKind::Arguments,
        FieldKind::ArgumentsJoined,
        FieldKind::Output,
        FieldKind::Messages,
        FieldKind::Plan,
        FieldKind::Chunk,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FieldKind::ToolName => "tool_name",
            FieldKind::Arguments => "arguments",
            FieldKind::ArgumentsJoined => "arguments_joined",
            FieldKind::Output => "output",
            FieldKind::Messages => "messages",
            FieldKind::Plan => "plan",
            FieldKind::Chunk => "chunk",
        }
    }

    pub fn parse(s: &str) -> Option<FieldKind> {
        FieldKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    pub fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A view of one piece of text in an event.
#[derive(Debug, Clone)]
pub struct Field<'a> {
    pub kind: FieldKind,
    /// `tool_name`, `$.command`, `$.files[2]`, `output`, `messages[0].content`, `chunk`; for
    /// an object member's name, the object's path and `[~index:hash]` (see `member_path`).
    pub path: String,
    pub text: Cow<'a, str>,
    /// The message role, for message fields.
    pub role: Option<&'a str>,
    pub part: Part,
}

impl<'a> Field<'a> {
    fn borrowed(kind: FieldKind, path: String, text: &'a str) -> Field<'a> {
        Field {
            kind,
            path,
            text: Cow::Borrowed(text),
            role: None,
            part: Part::Value,
        }
    }
}

/// Which part of a JSON argument a field's text is. Rules read object members' names as well
/// as values: a name can carry a command or a secret (`{"ghp_…": true}`) as well as a value
/// can.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// A value (a JSON string or number leaf), or text that is not JSON.
    Value,
    /// An object member's name.
    Name,
    /// A member's name directly followed by the head of its value (the name is the first
    /// `name_len` bytes): a secret split between the two (`{"AKIA": "IOSFODNN7EXAMPLE"}`)
    /// reads whole here. Only a match that crosses from the name into the value counts.
    NameAndValue { name_len: usize },
}

/// Objects up to this many members have a redacted name renamed in place. Finding, removing
/// and reinserting a member walks the object, so in larger objects a name's redaction
/// replaces the whole object instead: the work per redaction stays bounded.
const MEMBER_VIEWS_MAX: usize = 256;
/// Bytes of a member's value read after its name for secrets split between the two: longer
/// than any provider key.
const NAME_VALUE_HEAD: usize = 256;

/// A short hash of a member name, for its path: the path must find the member again without
/// holding the name, which may be the secret being redacted.
fn name_hash(name: &str) -> u32 {
    name.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The path of member `index` (named `name`) of the object at `object`, which has `members`
/// members: `$.a[~3:9c1d2e3f]` names the member's name, a `:value` suffix its name and value
/// together; in an object larger than `MEMBER_VIEWS_MAX`, `[~*3]` is member 3, redacted by
/// replacing the object. Every field has its own path: spans are merged and applied by path.
fn member_path(object: &str, members: usize, index: usize, name: &str, with_value: bool) -> String {
    let mut path = String::with_capacity(object.len() + 32);
    path.push_str(object);
    if members <= MEMBER_VIEWS_MAX {
        path.push_str("[~");
        push_decimal(&mut path, index);
        path.push(':');
        push_hex32(&mut path, name_hash(name));
    } else {
        path.push_str("[~*");
        push_decimal(&mut path, index);
    }
    path.push_str(if with_value { ":value]" } else { "]" });
    path
}

/// Path segments are written for every leaf and member of every call, so their numbers are
/// written by hand: `format!` took about a third of building an event's fields.
fn push_decimal(path: &mut String, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    path.extend(digits[at..].iter().map(|&d| char::from(d)));
}

/// Eight lowercase hex digits.
fn push_hex32(path: &mut String, h: u32) {
    let mut hex = [0u8; 8];
    crate::text::hex_digits(&h.to_be_bytes(), &mut hex);
    path.extend(hex.iter().map(|&d| char::from(d)));
}

/// The start of a value as read right after its member's name: a string's head, a number, or
/// for an object of one member that member's name, followed by its string value if it has one
/// (`{"AKIA": {"IOSF…": true}}` reads `AKIAIOSF…`). A number or flag at the end of such a
/// chain is filler, not a continuation.
fn value_head(v: &Value, budget: usize) -> Option<String> {
    match v {
        Value::Number(n) => Some(n.to_string()),
        _ => chain_head(v, budget),
    }
}

fn chain_head(v: &Value, budget: usize) -> Option<String> {
    match v {
        Value::String(s) if !s.is_empty() => Some(crate::text::head(s, budget).to_string()),
        Value::Object(map) if map.len() == 1 && budget > 0 => {
            let (k, inner) = map.iter().next()?;
            let k = crate::text::head(k, budget);
            let rest = chain_head(inner, budget - k.len()).unwrap_or_default();
            Some(format!("{k}{rest}"))
        }
        _ => None,
    }
}

/// Leaves up to this long take part in the joined view of split commands.
const JOINED_LEAF_MAX: usize = 256;

/// The short leaves joined by spaces, when there are at least two of them.
/// Lists of quoted strings read from one code text at most: a script with more is read
/// for its first ones only, the rest still scanned as plain text.
const MAX_ARGV_LISTS: usize = 64;
/// Items of one list kept; longer lists are data, not command lines.
const MAX_ARGV_ITEMS: usize = 64;

/// The command lines that list literals of quoted strings in `text` make: `['rm', '-rf',
/// "/x"]` or `("git", "push")` becomes `rm -rf /x`, one line per list. `None` when the text
/// has no such list of two or more items.
pub fn argv_lines(text: &str) -> Option<String> {
    let b = text.as_bytes();
    // Cheap screen: an opening bracket right before a quote, or one blank before it, as
    // every such list has. Brackets are rare in most text, so this reads little of it.
    let opens_list = |at: usize| match b.get(at + 1) {
        Some(b'\'' | b'"') => true,
        Some(b' ') => matches!(b.get(at + 2), Some(b'\'' | b'"')),
        _ => false,
    };
    if !memchr::memchr2_iter(b'[', b'(', b).any(opens_list) {
        return None;
    }
    let mut lines: Vec<String> = Vec::new();
    let mut i = 0;
    while i < b.len() && lines.len() < MAX_ARGV_LISTS {
        let Some(off) = memchr::memchr2(b'[', b'(', &b[i..]) else {
            break;
        };
        let open = i + off;
        let close = if b[open] == b'[' { b']' } else { b')' };
        let (items, end) = quoted_list(b, open + 1, close);
        if items.len() >= 2 && (is_call_argument(b, open) || has_operand(&items)) {
            lines.push(items.join(" "));
        }
        i = end.max(open + 1);
    }
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// The list is the first argument of a call (`run([...])`, `Popen(["git", ...])`).
fn is_call_argument(b: &[u8], open: usize) -> bool {
    if b[open] == b'(' {
        return true;
    }
    b[..open]
        .iter()
        .rev()
        .find(|c| !c.is_ascii_whitespace())
        .is_some_and(|&c| c == b'(')
}

/// A list that reads like a command line: an option, a path or a variable after the
/// program. `['rm', 'cp', 'mv']` in documentation is a list of names, not a command.
fn has_operand(items: &[String]) -> bool {
    items[1..].iter().any(|i| {
        i.starts_with(['-', '/', '.', '~'])
            || i.bytes()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
                && i.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
                && i.len() > 1
                && !i.bytes().all(|c| c.is_ascii_lowercase())
    })
}

/// Reads `'a', "b", ...` up to `close` from `at`; returns the items and where reading
/// stopped. Anything but quoted strings and commas ends the list (it is not an argv).
fn quoted_list(b: &[u8], mut at: usize, close: u8) -> (Vec<String>, usize) {
    let mut items = Vec::new();
    loop {
        while at < b.len() && b[at].is_ascii_whitespace() {
            at += 1;
        }
        let Some(&q) = b.get(at) else {
            return (Vec::new(), at);
        };
        if q == close {
            return (items, at + 1);
        }
        if q != b'\'' && q != b'"' {
            // A variable or expression after the program name (`['rm', '-rf', path]`)
            // stands for its value: kept as written. The program itself must be quoted.
            if items.is_empty() {
                return (Vec::new(), at);
            }
            let end = b[at..]
                .iter()
                .position(|&c| {
                    c == b','
                        || c == close
                        || matches!(c, b'(' | b'[' | b'{' | b'\n' | b'\'' | b'"')
                })
                .map_or(b.len(), |p| at + p);
            if end == b.len() || !(b[end] == b',' || b[end] == close) || end - at > 128 {
                return (Vec::new(), end);
            }
            if items.len() < MAX_ARGV_ITEMS {
                items.push(String::from_utf8_lossy(&b[at..end]).trim().to_string());
            }
            at = end;
            if b[at] == close {
                return (items, at + 1);
            }
            at += 1;
            continue;
        }
        let start = at + 1;
        let Some(len) = memchr::memchr(q, &b[start..]) else {
            return (Vec::new(), b.len());
        };
        // A backslash-escaped quote inside an item is rare in argv lists; such an item
        // ends the list rather than being half read.
        if b[start..start + len].contains(&b'\\') {
            return (Vec::new(), start + len + 1);
        }
        if items.len() < MAX_ARGV_ITEMS {
            items.push(String::from_utf8_lossy(&b[start..start + len]).into_owned());
        }
        at = start + len + 1;
        while at < b.len() && b[at].is_ascii_whitespace() {
            at += 1;
        }
        match b.get(at) {
            Some(b',') => at += 1,
            Some(&c) if c == close => return (items, at + 1),
            _ => return (Vec::new(), at),
        }
    }
}

fn joined_view(leaves: &[Field<'_>]) -> Option<String> {
    let short: Vec<&str> = leaves
        .iter()
        .filter(|f| f.part == Part::Value)
        .map(|f| f.text.as_ref())
        .filter(|t| t.len() <= JOINED_LEAF_MAX)
        .collect();
    (short.len() > 1).then(|| short.join(" "))
}

/// Walks a JSON value and reports every string (and number) leaf with its path, and every
/// object member's name. Numbers are included because card numbers and ids are often sent as
/// JSON numbers.
///
/// An object's names come after everything below them, and a member's name and value view
/// before its name: redactions are applied in field order, and a name is renamed only once
/// what lies under it has been redacted through the old name.
fn walk_leaves<'a>(v: &'a Value, path: &mut String, f: &mut dyn FnMut(String, Cow<'a, str>, Part)) {
    match v {
        Value::String(s) => f(path.clone(), Cow::Borrowed(s), Part::Value),
        Value::Number(n) => f(path.clone(), Cow::Owned(n.to_string()), Part::Value),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push('[');
                push_decimal(path, i);
                path.push(']');
                walk_leaves(item, path, f);
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            for (i, (k, item)) in map.iter().enumerate() {
                let len = path.len();
                if map.len() <= MEMBER_VIEWS_MAX && token_like(k) {
                    // A name that may be a secret is not written into the paths of what lies
                    // under it: those paths reach the decision and its log.
                    path.push_str("[#");
                    push_decimal(path, i);
                    path.push(':');
                    push_hex32(path, name_hash(k));
                    path.push(']');
                } else {
                    push_key(path, k);
                }
                walk_leaves(item, path, f);
                path.truncate(len);
            }
            for (i, (k, item)) in map.iter().enumerate() {
                // Every name with a value to continue it: a secret may be cut anywhere, even
                // inside its fixed prefix (`{"x": "oxb-…"}`).
                if !k.is_empty()
                    && let Some(head) = value_head(item, NAME_VALUE_HEAD)
                {
                    f(
                        member_path(path, map.len(), i, k, true),
                        Cow::Owned([k.as_str(), head.as_str()].concat()),
                        Part::NameAndValue { name_len: k.len() },
                    );
                }
                f(
                    member_path(path, map.len(), i, k, false),
                    Cow::Borrowed(k),
                    Part::Name,
                );
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
}

/// A name shaped like a credential rather than a word: letters and digits mixed over 12 or
/// more bytes, 32 or more bytes without a blank, or an assignment or URL with a user.
fn token_like(name: &str) -> bool {
    let b = name.as_bytes();
    let blank = b.iter().any(u8::is_ascii_whitespace);
    let mixed = b.iter().any(u8::is_ascii_digit) && b.iter().any(u8::is_ascii_alphabetic);
    (!blank && (b.len() >= 32 || (b.len() >= 12 && mixed)))
        || name.contains('=')
        || name.contains("://")
        || name.get(1..).is_some_and(|rest| rest.contains('@'))
}

fn push_key(path: &mut String, key: &str) {
    let plain = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if plain {
        path.push('.');
        path.push_str(key);
    } else {
        path.push_str("['");
        for c in key.chars() {
            if c == '\'' || c == '\\' {
                path.push('\\');
            }
            path.push(c);
        }
        path.push_str("']");
    }
}

/// Finds the JSON leaf a path names and replaces it, for redaction. Returns false when the
/// path does not name a string or number leaf.
pub fn replace_leaf(root: &mut Value, path: &str, new_text: String) -> bool {
    let Some(rest) = path.strip_prefix('$') else {
        return false;
    };
    let mut cur = root;
    let mut rest = rest;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("['") {
            let mut key = String::new();
            let mut chars = r.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            key.push(n);
                        }
                    }
                    '\'' => {
                        end = Some(i);
                        break;
                    }
                    c => key.push(c),
                }
            }
            let Some(end) = end else { return false };
            rest = match r[end..].strip_prefix("']") {
                Some(r) => r,
                None => return false,
            };
            cur = match cur.get_mut(&key) {
                Some(v) => v,
                None => return false,
            };
        } else if let Some(r) = rest.strip_prefix("[#") {
            // A member's value, named by position and name hash (`token_like` names).
            let Some(close) = r.find(']') else {
                return false;
            };
            let Some(key) = member_at(cur, &r[..close]) else {
                return false;
            };
            rest = &r[close + 1..];
            cur = match cur.get_mut(&key) {
                Some(v) => v,
                None => return false,
            };
        } else if let Some(r) = rest.strip_prefix("[~") {
            // A member's name: always the last segment.
            return match r.strip_suffix(']') {
                Some(spec) if !spec.contains(']') => replace_member(cur, spec, new_text),
                _ => false,
            };
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(close) = r.find(']') else {
                return false;
            };
            let Ok(idx) = r[..close].parse::<usize>() else {
                return false;
            };
            rest = &r[close + 1..];
            cur = match cur.get_mut(idx) {
                Some(v) => v,
                None => return false,
            };
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            rest = &r[end..];
            cur = match cur.get_mut(key) {
                Some(v) => v,
                None => return false,
            };
        } else {
            return false;
        }
    }
    match cur {
        Value::String(_) | Value::Number(_) => {
            *cur = Value::String(new_text);
            true
        }
        _ => false,
    }
}

/// Redacts a member's name (spec `index:hash`) or its name and value together (spec
/// `index:hash:value`) in `object`; spec `*index` replaces the whole object (see
/// `MEMBER_VIEWS_MAX`). Every step walks an object of at most `MEMBER_VIEWS_MAX` members.
///
/// A secret in a name is never passed on: the name is replaced by its redacted text, in
/// place, so the arguments keep their shape. When the secret runs from the name into the
/// value, the value goes too, and the new name keeps only the redaction (not the name's
/// leading text, which the split may have used to hide part of the secret). Names that
/// would collide get a `#2`, `#3` suffix so no member is lost to another.
fn replace_member(object: &mut Value, spec: &str, new_text: String) -> bool {
    let (member, with_value) = match spec.strip_suffix(":value") {
        Some(m) => (m, true),
        None => (spec, false),
    };
    if member.starts_with('*') {
        *object = Value::String(new_text);
        return true;
    }
    let Some(old) = member_at(object, member) else {
        return false;
    };
    let Value::Object(map) = object else {
        return false;
    };
    let Some(at) = map.keys().position(|k| *k == old) else {
        return false;
    };
    let Some(mut value) = map.shift_remove(&old) else {
        return false;
    };
    let mut name = new_text;
    if with_value {
        value = Value::String(String::new());
        let mut common = old
            .bytes()
            .zip(name.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        while !name.is_char_boundary(common) {
            common -= 1;
        }
        if common < name.len() {
            name.drain(..common);
        }
    }
    let name = unique_name(map, name);
    map.shift_insert(at.min(map.len()), name, value);
    true
}

/// The name of the member that `spec` (`index:hash`) names in `object`: the member is where
/// the walk saw it, and the hash confirms it is still the same one (or finds it if it moved).
fn member_at(object: &Value, spec: &str) -> Option<String> {
    let Value::Object(map) = object else {
        return None;
    };
    let (index, hash) = spec.split_once(':')?;
    let (index, hash) = (
        index.parse::<usize>().ok()?,
        u32::from_str_radix(hash, 16).ok()?,
    );
    match map.keys().nth(index) {
        Some(k) if name_hash(k) == hash => Some(k.clone()),
        _ => map.keys().find(|k| name_hash(k) == hash).cloned(),
    }
}

/// `name`, or `name#2`, `name#3`, … when the object already has it.
fn unique_name(map: &serde_json::Map<String, Value>, name: String) -> String {
    if !map.contains_key(&name) {
        return name;
    }
    // One of the first `len + 1` suffixes is free: the object has only `len` names.
    (2..map.len() + 3)
        .map(|n| format!("{name}#{n}"))
        .find(|candidate| !map.contains_key(candidate))
        .unwrap_or(name)
}

/// Text prepared for matching: NFKC-normalized with invisible format characters removed. The
/// offset map sends every byte of the normalized text back to the original char it came from,
/// so a match found in normalized text redacts the right original bytes.
#[derive(Debug, Clone)]
pub struct Normalized<'a> {
    pub text: Cow<'a, str>,
    /// `None` when the text was already normal (the common, ASCII case): offsets are identical.
    map: Option<OffsetMap>,
}

#[derive(Debug, Clone)]
struct OffsetMap {
    /// For each normalized byte: start of the original char it came from.
    start: Vec<u32>,
    /// For each normalized byte: end of the original char (or segment) it came from.
    end: Vec<u32>,
}

impl<'a> Normalized<'a> {
    pub fn new(original: &'a str) -> Normalized<'a> {
        // Fast path: ASCII is NFKC already and has no invisible format characters.
        if original.is_ascii() {
            return Normalized {
                text: Cow::Borrowed(original),
                map: None,
            };
        }
        let needs_work = original.chars().any(is_invisible)
            || !matches!(
                unicode_normalization::is_nfkc_quick(original.chars()),
                unicode_normalization::IsNormalized::Yes
            );
        if !needs_work {
            return Normalized {
                text: Cow::Borrowed(original),
                map: None,
            };
        }
        let mut text = String::with_capacity(original.len());
        let mut start = Vec::with_capacity(original.len());
        let mut end = Vec::with_capacity(original.len());
        // Normalize segment by segment (a starter and the combining marks after it) so
        // composition stays inside a segment and every output byte has one source range.
        let mut seg_start: Option<usize> = None;
        let mut segment = String::new();
        let mut flush = |seg: &mut String, s: usize, e: usize, text: &mut String| {
            if seg.is_empty() {
                return;
            }
            let before = text.len();
            text.extend(seg.nfkc());
            for _ in before..text.len() {
                start.push(s as u32);
                end.push(e as u32);
            }
            seg.clear();
        };
        for (i, c) in original.char_indices() {
            if is_invisible(c) {
                continue;
            }
            if canonical_combining_class(c) == 0 {
                if let Some(s) = seg_start {
                    flush(&mut segment, s, i, &mut text);
                }
                seg_start = Some(i);
            } else if seg_start.is_none() {
                seg_start = Some(i);
            }
            segment.push(c);
        }
        if let Some(s) = seg_start {
            flush(&mut segment, s, original.len(), &mut text);
        }
        // A segment's end may include trailing invisible chars; trim each end back to the last
        // visible char of its segment is unnecessary: covering them in a redaction is harmless
        // and keeps the range on char boundaries.
        Normalized {
            text: Cow::Owned(text),
            map: Some(OffsetMap { start, end }),
        }
    }

    /// Maps a byte range of the normalized text back to the original text. The result is on
    /// char boundaries of the original and covers every char the normalized range came from.
    pub fn original_range(&self, start: usize, end: usize) -> (usize, usize) {
        match &self.map {
            None => (start, end),
            Some(m) => {
                if start >= end || m.start.is_empty() {
                    let at = m
                        .start
                        .get(start)
                        .copied()
                        .unwrap_or_else(|| m.end.last().copied().unwrap_or(0));
                    return (at as usize, at as usize);
                }
                let s = m.start[start.min(m.start.len() - 1)] as usize;
                let e = m.end[(end - 1).min(m.end.len() - 1)] as usize;
                (s, e.max(s))
            }
        }
    }
}

/// Zero-width and other invisible format characters used to split keywords past filters.
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}'            // soft hyphen
        | '\u{034F}'          // combining grapheme joiner
        | '\u{061C}'          // arabic letter mark
        | '\u{115F}' | '\u{1160}'
        | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}'
        | '\u{200B}'..='\u{200F}' // zero-width space/joiners, LRM, RLM
        | '\u{202A}'..='\u{202E}' // bidi embedding and override
        | '\u{2060}'..='\u{206F}' // word joiner, invisible operators, bidi isolates
        | '\u{3164}'
        | '\u{FE00}'..='\u{FE0F}' // variation selectors
        | '\u{FEFF}'          // BOM / zero-width no-break space
        | '\u{FFA0}'
        | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0000}'..='\u{E007F}' // tag characters
        | '\u{E0100}'..='\u{E01EF}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_lists_in_code_read_as_command_lines() {
        let got = |t: &str| argv_lines(t);
        assert_eq!(
            got("subprocess.run(['rm', '-rf', '/home/user/data'])").as_deref(),
            Some("rm -rf /home/user/data")
        );
        assert_eq!(
            got("subprocess.Popen((\"git\", \"push\", \"--force\"))").as_deref(),
            Some("git push --force")
        );
        assert_eq!(
            got("run(['rm', '-rf', path])").as_deref(),
            Some("rm -rf path")
        );
        assert_eq!(
            got("a = ['ls', '-la']\nb = run(['git', 'status'])").as_deref(),
            Some("ls -la\ngit status")
        );
        // Not command lines: names in a list, one item, nested calls, no quotes.
        assert_eq!(got("BLOCKED = ['rm', 'cp', 'mv']"), None);
        assert_eq!(got("run(['ls'])"), None);
        assert_eq!(got("x = [f(a), g(b)]"), None);
        assert_eq!(got("plain text without lists"), None);
        assert_eq!(
            got("['rm', '-rf', '/x'"),
            None,
            "an unclosed list is not read"
        );
    }

    #[test]
    fn a_code_argument_gets_a_joined_argv_field() {
        let mut e = Event::new(EventKind::ToolCallStart, Context::default());
        e.arguments = Some(serde_json::json!({"code": "subprocess.run(['rm', '-rf', '/srv'])"}));
        let fields = e.fields();
        let joined: Vec<&str> = fields
            .iter()
            .filter(|f| f.kind == FieldKind::ArgumentsJoined)
            .map(|f| f.text.as_ref())
            .collect();
        assert_eq!(joined, vec!["rm -rf /srv"]);
    }
    use serde_json::json;

    #[test]
    fn ascii_is_borrowed_and_identity_mapped() {
        let n = Normalized::new("rm -rf /tmp");
        assert!(matches!(n.text, Cow::Borrowed(_)));
        assert_eq!(n.original_range(0, 6), (0, 6));
    }

    #[test]
    fn zero_width_and_fullwidth_fold_and_map_back() {
        let original = "x r\u{200B}m ｒｍ";
        let n = Normalized::new(original);
        assert_eq!(n.text, "x rm rm");
        // "rm" with a zero-width space inside maps to the bytes including it.
        let (s, e) = n.original_range(2, 4);
        assert_eq!(&original[s..e], "r\u{200B}m");
        let (s, e) = n.original_range(5, 7);
        assert_eq!(&original[s..e], "ｒｍ");
    }

    #[test]
    fn ligature_maps_to_whole_char() {
        let original = "ﬁle";
        let n = Normalized::new(original);
        assert_eq!(n.text, "file");
        let (s, e) = n.original_range(1, 2);
        assert_eq!(&original[s..e], "ﬁ");
    }

    #[test]
    fn json_leaves_have_paths_and_replace_back() {
        let mut e = Event::new(EventKind::ToolCallStart, Context::default());
        e.tool_name = "shell.exec".into();
        e.arguments =
            Some(json!({"command": "ls", "files": ["a", "b", 4111], "odd key": {"x": "y"}}));
        let fields = e.fields();
        let paths: Vec<_> = fields
            .iter()
            .filter(|f| f.part == Part::Value)
            .map(|f| f.path.as_str())
            .collect();
        assert_eq!(
            paths,
            vec![
                "tool_name",
                "$.command",
                "$.files[0]",
                "$.files[1]",
                "$.files[2]",
                "$['odd key'].x",
                "$"
            ]
        );
        let mut args = e.arguments.clone().unwrap();
        assert!(replace_leaf(&mut args, "$.files[2]", "[X]".into()));
        assert!(replace_leaf(&mut args, "$['odd key'].x", "[Y]".into()));
        assert_eq!(args["files"][2], "[X]");
        assert_eq!(args["odd key"]["x"], "[Y]");
        assert!(!replace_leaf(&mut args, "$.missing", "z".into()));
    }

    fn views(args: Value) -> Vec<(String, String, Part)> {
        let mut e = Event::new(EventKind::ToolCallStart, Context::default());
        e.arguments = Some(args);
        e.fields()
            .into_iter()
            .filter(|f| f.part != Part::Value)
            .map(|f| (f.path, f.text.into_owned(), f.part))
            .collect()
    }

    #[test]
    fn member_names_are_fields_after_what_lies_under_them() {
        let h = |name: &str| format!("{:08x}", name_hash(name));
        let got = views(json!({"AKIA": "IOSF", "cmd": {"ghp_x": true}, "n": 7}));
        assert_eq!(
            got,
            vec![
                // The inner object's name first: it is renamed before its parent's.
                (
                    format!("$.cmd[~0:{}]", h("ghp_x")),
                    "ghp_x".into(),
                    Part::Name
                ),
                (
                    format!("$[~0:{}:value]", h("AKIA")),
                    "AKIAIOSF".into(),
                    Part::NameAndValue { name_len: 4 }
                ),
                (format!("$[~0:{}]", h("AKIA")), "AKIA".into(), Part::Name),
                // An object of one member continues its name with the inner name.
                (
                    format!("$[~1:{}:value]", h("cmd")),
                    "cmdghp_x".into(),
                    Part::NameAndValue { name_len: 3 }
                ),
                (format!("$[~1:{}]", h("cmd")), "cmd".into(), Part::Name),
                (
                    format!("$[~2:{}:value]", h("n")),
                    "n7".into(),
                    Part::NameAndValue { name_len: 1 }
                ),
                (format!("$[~2:{}]", h("n")), "n".into(), Part::Name),
            ]
        );
        // A one-member object under a name reads as the name's continuation.
        let got = views(json!({"AKIA": {"IOSFODNN7EXAMPLE": true}}));
        assert!(
            got.iter().any(|(_, t, _)| t == "AKIAIOSFODNN7EXAMPLE"),
            "{got:?}"
        );
        // Look-alikes: names that hold no value text get no name-and-value view.
        let got = views(json!({"AKIA_count": true, "list": []}));
        assert!(got.iter().all(|(_, _, p)| *p == Part::Name), "{got:?}");
    }

    #[test]
    fn names_shaped_like_credentials_stay_out_of_paths() {
        let token = "ghp_aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6";
        let mut e = Event::new(EventKind::ToolCallStart, Context::default());
        e.arguments = Some(json!({ token: {"note": "x"}, "created_at": "y" }));
        let paths: Vec<String> = e
            .fields()
            .into_iter()
            .filter(|f| f.part == Part::Value && f.kind == FieldKind::Arguments)
            .map(|f| f.path)
            .collect();
        let hidden = format!("$[#0:{:08x}].note", name_hash(token));
        assert_eq!(paths, vec![hidden.clone(), "$.created_at".to_string()]);
        let mut args = e.arguments.clone().unwrap();
        assert!(replace_leaf(&mut args, &hidden, "[X]".into()));
        assert_eq!(args[token]["note"], "[X]");
        for name in [
            "AKIAIOSFODNN7EXAMPLE",
            "password=hunter2",
            "https://u:p@db.example",
            "sk-proj-abcdefghijklmnopqrstuvwxyz",
        ] {
            assert!(token_like(name), "{name}");
        }
        // Look-alikes: words, identifiers, JSON-LD keywords, names with blanks.
        for name in [
            "created_at",
            "PYTHONUNBUFFERED",
            "odd key",
            "@context",
            "v2",
            "utf8",
        ] {
            assert!(!token_like(name), "{name}");
        }
    }

    #[test]
    fn a_member_name_is_renamed_in_place() {
        let mut args = json!({"a": 1, "ghp_secret": true, "z": 2});
        let path = member_path("$", 3, 1, "ghp_secret", false);
        assert!(replace_leaf(
            &mut args,
            &path,
            "[REDACTED:github_token]".into()
        ));
        assert_eq!(
            serde_json::to_string(&args).unwrap(),
            r#"{"a":1,"[REDACTED:github_token]":true,"z":2}"#
        );
        // The name is gone, so the same path finds nothing the second time.
        assert!(!replace_leaf(&mut args, &path, "x".into()));
    }

    #[test]
    fn a_name_and_value_redaction_drops_both_and_keeps_no_name_text() {
        let mut args = json!({"note": "hi", "x AKIA": "IOSFODNN7EXAMPLE"});
        let path = member_path("$", 2, 1, "x AKIA", true);
        assert!(replace_leaf(
            &mut args,
            &path,
            "x [REDACTED:aws_access_key]".into()
        ));
        assert_eq!(
            serde_json::to_string(&args).unwrap(),
            r#"{"note":"hi","[REDACTED:aws_access_key]":""}"#
        );
    }

    #[test]
    fn renamed_members_never_collide() {
        let mut args = json!({"[R]": 1, "k1": 2, "k2": 3});
        assert!(replace_leaf(
            &mut args,
            &member_path("$", 3, 1, "k1", false),
            "[R]".into()
        ));
        assert!(replace_leaf(
            &mut args,
            &member_path("$", 3, 2, "k2", false),
            "[R]".into()
        ));
        assert_eq!(
            serde_json::to_string(&args).unwrap(),
            r#"{"[R]":1,"[R]#2":2,"[R]#3":3}"#
        );
    }

    #[test]
    fn a_member_moved_since_the_walk_is_found_by_its_hash() {
        let mut args = json!({"b": 1, "secret_key_1": 2});
        let path = member_path("$", 2, 0, "secret_key_1", false);
        assert!(replace_leaf(&mut args, &path, "[R]".into()));
        assert_eq!(serde_json::to_string(&args).unwrap(), r#"{"b":1,"[R]":2}"#);
    }

    #[test]
    fn names_in_a_large_object_replace_the_object() {
        let map: serde_json::Map<String, Value> = (0..MEMBER_VIEWS_MAX + 1)
            .map(|i| (format!("k{i}"), Value::from(i)))
            .collect();
        let mut args = json!({ "big": map });
        let path = member_path("$.big", MEMBER_VIEWS_MAX + 1, 0, "k0", false);
        assert_eq!(path, "$.big[~*0]");
        assert!(replace_leaf(&mut args, &path, "[REDACTED:x]".into()));
        assert_eq!(args, json!({"big": "[REDACTED:x]"}));
    }
}
