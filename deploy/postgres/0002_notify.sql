-- Every change to a tenant's rows bumps the row's version, stamps updated_at and notifies
-- channel `ai_guardrails_policy_rules` with the tenant, so toolgate replicas refresh that
-- tenant at once instead of waiting for their cache to expire.
CREATE FUNCTION ai_guardrails.policy_rules_touch() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        NEW.version := OLD.version + 1;
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END
$$;

CREATE TRIGGER policy_rules_touch
    BEFORE INSERT OR UPDATE ON ai_guardrails.policy_rules
    FOR EACH ROW EXECUTE FUNCTION ai_guardrails.policy_rules_touch();

CREATE FUNCTION ai_guardrails.policy_rules_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- A tenant renamed by an UPDATE is refreshed under both names; PostgreSQL folds
    -- identical notifications of one transaction into one.
    IF TG_OP <> 'INSERT' THEN
        PERFORM pg_notify('ai_guardrails_policy_rules', OLD.tenant);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM pg_notify('ai_guardrails_policy_rules', NEW.tenant);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER policy_rules_notify
    AFTER INSERT OR UPDATE OR DELETE ON ai_guardrails.policy_rules
    FOR EACH ROW EXECUTE FUNCTION ai_guardrails.policy_rules_notify();
