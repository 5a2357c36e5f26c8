//! The route plan: what the tool's tier means for one event, worked out once. The fast scan,
//! the session gate, the deep stage and the effects all read this plan instead of looking
//! the tier up again.

use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;

use crate::decision::{Action, RiskLevel};
use crate::event::{Event, EventKind};
use crate::policy::Policy;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoutePlan {
    /// The tier of the tool the event calls or reports on; `None` for prompts and chunks.
    pub tool_tier: Option<RiskLevel>,
    /// The tier the router treats the event as: a prompt waits as high once its session has
    /// used a high-risk tool, or when it asks about the system itself.
    pub wait_tier: Option<RiskLevel>,
    /// How long the decision waits for deep rules: `None` waits for their answers (offline
    /// replays), zero does not wait.
    pub wait: Option<Duration>,
    /// What a deep rule that fails or does not answer in time means on this tier.
    pub fail: Action,
    /// The tool call needs a human's approval (its tier is listed in `require_approval`).
    pub approval: bool,
    /// The prompt forces the jailbreak-class deep rules to run.
    pub forced_jailbreak: bool,
}

impl RoutePlan {
    /// `used_high_risk_tool`: the event's session has called a high or critical tool.
    pub fn of(
        event: &Event,
        policy: &Policy,
        used_high_risk_tool: bool,
        offline: bool,
    ) -> RoutePlan {
        let tool_tier = policy.tiers.of_event(event);
        let forced_jailbreak = event.kind == EventKind::LlmBefore && asks_about_system(event);
        let wait_tier = match event.kind {
            EventKind::ToolCallStart | EventKind::ToolCallResult => tool_tier,
            // A prompt waits like a high-risk call once the session has used one: that is
            // when a poisoned prompt does the most harm.
            EventKind::LlmBefore => {
                (used_high_risk_tool || forced_jailbreak).then_some(RiskLevel::High)
            }
            EventKind::LlmStreamChunk => None,
        };
        let wait = match wait_tier {
            Some(RiskLevel::Critical | RiskLevel::High) => policy.router.high_risk_wait,
            Some(RiskLevel::Medium) => policy.router.medium_risk_wait,
            _ => Duration::ZERO,
        };
        // Offline, a tier that waits waits for the answer (up to each rule's own budget), so
        // a replay does not depend on machine load; a tier that does not wait still does not.
        let wait = (!offline || wait.is_zero()).then_some(wait);
        let approval = event.kind == EventKind::ToolCallStart
            && tool_tier.is_some_and(|t| policy.router.require_approval.contains(&t));
        RoutePlan {
            tool_tier,
            wait_tier,
            wait,
            fail: fail_action(policy, wait_tier),
            approval,
            forced_jailbreak,
        }
    }

    /// What a failure means when it arrives after the decision: on a tier that waited, the
    /// wait-timeout hit already answered for it; on one that does not wait, it is the only
    /// answer, given to the session's next event.
    pub fn late_fail(&self) -> Action {
        if self.wait.is_some_and(|w| w.is_zero()) {
            self.fail
        } else {
            Action::Allow
        }
    }

    /// The call uses a high or critical tool (prompts later in its session wait as high).
    pub fn uses_high_risk_tool(&self, event: &Event) -> bool {
        event.kind == EventKind::ToolCallStart
            && self.tool_tier.is_some_and(|t| t >= RiskLevel::High)
    }
}

/// What the router does when a deep rule fails or does not answer in time.
fn fail_action(policy: &Policy, tier: Option<RiskLevel>) -> Action {
    match tier {
        Some(RiskLevel::Critical) if policy.router.critical_fail_closed => Action::Stop,
        Some(RiskLevel::Critical) | Some(RiskLevel::High) => Action::Pause,
        _ if policy.async_cfg.fail_open => Action::Allow,
        _ => Action::Stop,
    }
}

/// Prompts that ask about the system itself or try to change what the assistant may do.
fn asks_about_system(event: &Event) -> bool {
    static RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(
            r"(?i)\b(?:system\s+(?:prompt|message|instructions?)|(?:your|the)\s+(?:hidden\s+|initial\s+|original\s+)?(?:instructions|guidelines|configuration|capabilities|permissions)\b|(?:developer|god|debug|jailbreak|unrestricted)\s+mode|(?:disable|bypass|turn\s+off|remove)\s+(?:your\s+|the\s+|all\s+)?(?:safety|guardrails?|filters?|restrictions|content\s+polic)|(?:grant|give)\s+(?:me|yourself)\s+(?:admin|root|sudo|elevated|full|unrestricted)\s+(?:access|rights|permissions|privileges)|(?:which|what)\s+(?:model|llm)\s+are\s+you|(?:list|show|print|dump)\s+(?:all\s+)?(?:your\s+|the\s+)?(?:environment\s+variables|env\s+vars|api\s+keys|tools\s+you\s+can))",
        )
        .ok()
    });
    let Some(re) = RE.as_ref() else {
        return false;
    };
    event
        .messages
        .iter()
        .filter(|m| m.role.is_empty() || m.role.eq_ignore_ascii_case("user"))
        .any(|m| re.is_match(&m.content))
}
