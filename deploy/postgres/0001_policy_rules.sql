-- Per-tenant policy rules: each row is one custom rule (the same keys as a pack's
-- `sync_rules` entry, without `id`) plus tool tiers, compiled by toolgate into an overlay on
-- its base pack for that tenant only.
CREATE SCHEMA IF NOT EXISTS ai_guardrails;

CREATE TABLE ai_guardrails.policy_rules (
    tenant     text        NOT NULL CHECK (length(tenant) BETWEEN 1 AND 256),
    rule_id    text        NOT NULL CHECK (length(rule_id) BETWEEN 1 AND 256),
    enabled    boolean     NOT NULL DEFAULT true,
    -- The rule's fields: regex, keywords, action, level, reason, guidance, applies_to,
    -- tools, fields, tags, ... exactly as under `sync_rules:` in a pack.
    rule       jsonb       NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(rule) = 'object'),
    -- Tool tiers for this tenant: {"payments.*": "critical"}, as under `tool_risks:`.
    tool_risks jsonb       NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(tool_risks) = 'object'),
    version    bigint      NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, rule_id)
);
