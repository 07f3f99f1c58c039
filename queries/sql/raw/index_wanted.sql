-- The ids whose trace index rows the scope's next pass (scope.sql) reads, for queries/catch_up.py to add the
-- previous state's rows of to _idx (each trace whole, looked up by key: store/keyed.py) before the pass:
--   * traces: the changed and scoped traces, and those of the scoped steps' previous rows (_stepped), whose
--     rows the pass looks up by trace and whose time ranges say which segments hold their spans;
--   * keys: the rollouts the pass looks up (changed, scoped, and those of the scoped steps' previous rows),
--     their groups (from their rows in _idx), and those groups' members, whose traces the pass reads.
-- derive.py asks again after each fill: a rollout's rows just added may name a group, a group's a member.
WITH rollouts AS (
    SELECT rollout_id FROM _scope_changed
    UNION
    SELECT rollout_id FROM _scope_rollouts
    UNION
    SELECT rollout_id FROM _stepped
    WHERE rollout_id IS NOT NULL AND (step IS NULL OR step IN (SELECT step FROM _scope_steps))
),
groups AS (
    SELECT DISTINCT group_id FROM _idx SEMI JOIN rollouts USING (rollout_id) WHERE group_id IS NOT NULL
),
members AS (
    SELECT DISTINCT rollout_id FROM _idx SEMI JOIN groups USING (group_id) WHERE rollout_id IS NOT NULL
)
SELECT
    (
        SELECT list(trace_id) FROM (
            SELECT trace_id FROM _changed_traces
            UNION
            SELECT trace_id FROM _scope_traces
            UNION
            SELECT unhex(trace_id) FROM _stepped
            WHERE trace_id IS NOT NULL AND (step IS NULL OR step IN (SELECT step FROM _scope_steps))
        )
    ) AS traces,
    (
        SELECT list(key) FROM (
            SELECT rollout_id AS key FROM rollouts
            UNION
            SELECT group_id FROM groups
            UNION
            SELECT rollout_id FROM members
        )
    ) AS keys;
