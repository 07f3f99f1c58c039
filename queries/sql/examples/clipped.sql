-- Example rollouts from their transcripts (docs/transcripts.md, "Examples"): rollouts with a message that
-- ended with finish reason $finish_reason ('length': a generation cut at the token limit, a clipped rollout),
-- the most such messages first. Filters, rows and total as examples/rollouts.sql.
WITH stages AS (
    SELECT rollout_id, group_id, step, environment, reward, lost_at, lost_reason
    FROM rollout_stages($run_id)
    WHERE ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
ended AS (
    SELECT rollout_id, count(*) AS messages
    FROM messages
    WHERE run_id = $run_id AND finish_reason = $finish_reason AND rollout_id IS NOT NULL
    GROUP BY rollout_id
),
chosen AS (
    SELECT
        s.rollout_id, s.group_id, s.step, s.environment, s.reward, s.lost_at,
        _loss_reason(s.lost_reason, s.group_id) AS lost_reason, e.messages AS value
    FROM stages AS s
    JOIN ended AS e USING (rollout_id)
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
SELECT rollout_id, group_id, step, environment, reward, lost_at, lost_reason, value, total, groups
FROM ranked
ORDER BY in_group, value DESC NULLS LAST, step DESC NULLS FIRST, rollout_id
LIMIT $limit
