//! Tool → risk tier: exact names first, then the most specific matching glob, then the
//! default (`*` or `__default__`, medium unless set).

use crate::decision::RiskLevel;
use crate::glob::Glob;

/// Tool globs and their tiers, most specific first.
type Tiers = Vec<(Glob, RiskLevel)>;

#[derive(Debug, Clone)]
pub struct ToolTiers {
    /// Literal names and globs, most specific first (declaration order breaks ties).
    entries: Vec<(Glob, RiskLevel)>,
    default: RiskLevel,
    /// `callers.tool_risks`: tiers for some callers, in declaration order, looked up first.
    scoped: Vec<(Vec<Glob>, Tiers)>,
}

impl Default for ToolTiers {
    fn default() -> Self {
        ToolTiers {
            entries: Vec::new(),
            default: RiskLevel::Medium,
            scoped: Vec::new(),
        }
    }
}

impl ToolTiers {
    /// `entries` in declaration order; `*` and `__default__` set the default.
    pub fn new(entries: Vec<(String, RiskLevel)>) -> ToolTiers {
        let mut default = RiskLevel::Medium;
        let mut list = Vec::new();
        for (name, level) in entries {
            if name == "*" || name == "__default__" {
                default = level;
            } else {
                list.push((Glob::new(&name), level));
            }
        }
        sort(&mut list);
        ToolTiers {
            entries: list,
            default,
            scoped: Vec::new(),
        }
    }

    /// Adds tiers that apply only to these callers, before every entry added so far.
    pub fn scope(&mut self, callers: Vec<Glob>, entries: Vec<(String, RiskLevel)>) {
        let mut list: Vec<_> = entries
            .into_iter()
            .map(|(name, level)| (Glob::new(&name), level))
            .collect();
        sort(&mut list);
        self.scoped.push((callers, list));
    }

    pub fn tier(&self, tool: &str) -> RiskLevel {
        self.tier_for(tool, "")
    }

    /// The tool's tier for this caller: a `callers.tool_risks` entry that names both wins,
    /// then the pack's own tiers.
    pub fn tier_for(&self, tool: &str, caller: &str) -> RiskLevel {
        let find = |list: &[(Glob, RiskLevel)]| {
            list.iter().find(|(g, _)| g.matches(tool)).map(|(_, l)| *l)
        };
        self.scoped
            .iter()
            .filter(|(callers, _)| crate::policy::in_scope(callers, caller))
            .find_map(|(_, list)| find(list))
            .or_else(|| find(&self.entries))
            .unwrap_or(self.default)
    }

    /// The tier of the tool an event calls or reports on; `None` for prompts and streamed
    /// chunks, which name no tool.
    pub fn of_event(&self, event: &crate::event::Event) -> Option<RiskLevel> {
        use crate::event::EventKind;
        match event.kind {
            EventKind::ToolCallStart | EventKind::ToolCallResult => {
                Some(self.tier_for(&event.tool_name, &event.context.caller))
            }
            EventKind::LlmBefore | EventKind::LlmStreamChunk => None,
        }
    }

    pub fn default_tier(&self) -> RiskLevel {
        self.default
    }
}

/// Stable sort keeps declaration order among equally specific globs; literals beat any glob.
fn sort(list: &mut [(Glob, RiskLevel)]) {
    list.sort_by_key(|(g, _)| (!g.is_literal(), std::cmp::Reverse(g.specificity())));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_beats_glob_beats_default() {
        let t = ToolTiers::new(vec![
            ("*".into(), RiskLevel::Low),
            ("shell.*".into(), RiskLevel::High),
            ("shell.echo".into(), RiskLevel::Safe),
            ("tools.delete_user".into(), RiskLevel::Critical),
        ]);
        assert_eq!(t.tier("shell.echo"), RiskLevel::Safe);
        assert_eq!(t.tier("shell.exec"), RiskLevel::High);
        assert_eq!(t.tier("tools.delete_user"), RiskLevel::Critical);
        assert_eq!(t.tier("search"), RiskLevel::Low);
        assert_eq!(ToolTiers::default().tier("x"), RiskLevel::Medium);
        let d = ToolTiers::new(vec![("__default__".into(), RiskLevel::High)]);
        assert_eq!(d.tier("x"), RiskLevel::High);
    }
}
