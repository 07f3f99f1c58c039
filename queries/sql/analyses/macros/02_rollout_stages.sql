-- rollout_stages(run): one row per rollout with the funnel stage flags of docs/metrics.md, the stage it was
-- lost at and why. Recorded rl.sample decisions win; without one a stage is derived from the rollout's
-- status, its reward, its group's rewards and its staleness. Groups are judged over the whole run, so a
-- filter on step or environment never changes which rollouts have signal.
CREATE OR REPLACE MACRO _rollout_stages_src(run) AS TABLE
WITH bound AS (
    SELECT max(staleness_bound) AS bound FROM spans WHERE run_id = run
),
judged AS (
    SELECT
        rollout_id,
        bool_or(judge_status = 'timeout') AS judge_timeout,
        bool_or(judge_status = 'error') AS judge_error
    FROM (
        SELECT rollout_id, judge_status FROM judges WHERE run_id = run AND judge_status IN ('timeout', 'error')
        UNION ALL
        SELECT rollout_id, judge_status FROM rewards WHERE run_id = run AND judge_status IN ('timeout', 'error')
    )
    GROUP BY rollout_id
),
completed AS (
    SELECT
        s.*,
        coalesce(j.judge_timeout, false) AS judge_timeout, coalesce(j.judge_error, false) AS judge_error,
        CASE WHEN s.decision IS NOT NULL THEN s.decision <> 'invalid' ELSE s.rollout_status = 'ok' END
            AS completed
    FROM rollout_steps(run) AS s
    LEFT JOIN judged AS j USING (rollout_id)
),
scored AS (
    SELECT
        *,
        completed AND CASE
            WHEN decision IS NOT NULL THEN decision NOT IN ('invalid', 'unscored')
            ELSE reward IS NOT NULL
        END AS scored
    FROM completed
),
groups AS (
    SELECT group_id, count(*) AS scored_members, min(reward) <> max(reward) AS rewards_vary
    FROM scored
    WHERE scored AND reward IS NOT NULL AND group_id IS NOT NULL
    GROUP BY group_id
),
signal AS (
    SELECT
        s.*,
        coalesce(g.scored_members, 0) AS group_scored,
        s.scored AND CASE
            WHEN s.decision IS NOT NULL THEN s.decision <> 'zero_signal'
            ELSE coalesce(g.scored_members >= 2 AND g.rewards_vary, false)
        END AS nonzero_signal
    FROM scored AS s
    LEFT JOIN groups AS g USING (group_id)
),
fresh AS (
    SELECT
        s.*,
        b.bound AS staleness_bound,
        s.nonzero_signal AND CASE
            WHEN s.decision IS NOT NULL THEN s.decision = 'used'
            ELSE coalesce(s.staleness <= coalesce(b.bound, s.staleness), false)
        END AS fresh
    FROM signal AS s, bound AS b
)
SELECT
    * EXCLUDE (judge_timeout, judge_error),
    fresh AS usable,
    CASE
        WHEN NOT completed THEN 'completed'
        WHEN NOT scored THEN 'scored'
        WHEN NOT nonzero_signal THEN 'nonzero_signal'
        WHEN NOT fresh THEN 'fresh'
    END AS lost_at,
    CASE
        WHEN NOT completed THEN CASE WHEN rollout_status <> 'ok' THEN rollout_status ELSE 'invalid' END
        WHEN NOT scored THEN CASE
            WHEN judge_timeout THEN 'judge timeout' WHEN judge_error THEN 'judge error' ELSE 'no reward'
        END
        WHEN NOT nonzero_signal THEN CASE
            WHEN decision IS NULL AND group_scored < 2 THEN 'group too small' ELSE 'all-equal group'
        END
        WHEN NOT fresh THEN CASE WHEN staleness IS NULL THEN 'not consumed yet' ELSE 'stale' END
    END AS lost_reason
FROM fresh;
-- The public name; a reader points it at the store's derived table of _rollout_stages_src (queries/tables.py).
CREATE OR REPLACE MACRO rollout_stages(run) AS TABLE SELECT * FROM _rollout_stages_src(run);
