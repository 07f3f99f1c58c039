-- Example rollouts of a speculative-decoding selection (docs/transcripts.md, "Examples"), from their turns:
--   drafter_logprobs  rollouts with turns that recorded the drafter's log-probabilities (the log-prob lint's
--                     turns), the most such turns first
--   low_acceptance    rollouts whose turns drafted tokens, the lowest share of drafted tokens accepted first
--                     (acceptance drift, a stale drafter), of the latest $versions policy versions drafted with
-- Filters, rows and total as examples/rollouts.sql.
WITH stages AS (
    SELECT rollout_id, group_id, step, environment, reward, lost_at, lost_reason
    FROM rollout_stages($run_id)
    WHERE ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
drafted AS (
    SELECT
        rollout_id, policy_version,
        count(*) FILTER (logprobs_source = 'drafter') AS drafter_turns,
        sum(spec_accepted_tokens) / nullif(sum(spec_draft_tokens), 0) AS acceptance
    FROM turns
    WHERE run_id = $run_id AND rollout_id IS NOT NULL
      AND (logprobs_source = 'drafter' OR spec_draft_tokens > 0)
    GROUP BY rollout_id, policy_version
),
latest AS (
    SELECT max(policy_version) - $versions AS from_version FROM drafted
),
chosen AS (
    SELECT
        s.rollout_id, s.group_id, s.step, s.environment, s.reward, s.lost_at,
        _loss_reason(s.lost_reason, s.group_id) AS lost_reason,
        CASE $kind WHEN 'drafter_logprobs' THEN d.drafter_turns ELSE -d.acceptance END AS value
    FROM stages AS s
    JOIN drafted AS d USING (rollout_id)
    WHERE CASE $kind
        WHEN 'drafter_logprobs' THEN d.drafter_turns > 0
        WHEN 'low_acceptance' THEN d.acceptance IS NOT NULL
            AND d.policy_version > (SELECT from_version FROM latest)
    END
),
ranked AS (
    SELECT
        *,
        row_number() OVER (
            PARTITION BY coalesce(group_id, rollout_id) ORDER BY value DESC NULLS LAST, rollout_id
        ) AS in_group,
        count(*) OVER () AS total,
        count(DISTINCT coalesce(group_id, rollout_id)) OVER () AS groups
    FROM chosen
)
SELECT
    rollout_id, group_id, step, environment, reward, lost_at, lost_reason,
    CASE $kind WHEN 'low_acceptance' THEN -value ELSE value END AS value, total, groups
FROM ranked
ORDER BY in_group, value DESC NULLS LAST, step DESC NULLS FIRST, rollout_id
LIMIT $limit
