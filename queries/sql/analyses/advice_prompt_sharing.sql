-- Advisor lever "prompt sharing" (docs/advisor.md): the group shares its task prompt through the prefix cache,
-- so only one member prefills it (the group on one server, or a cache that keeps the prompt until the last
-- member asks). What every other member prefilled of it on its first turn (_prefill_split, macros/11), at the
-- turns' measured prefill rate per step and environment (_prefill_split_work):
--   Δwork_rollout = − Σ prefill seconds of the task prompt prefilled again
-- usable is unchanged. Does not apply without groups, when no member prefilled its group's prompt again, or when
-- no turn recorded its prefill time.
WITH b AS (SELECT unnest($base)),  -- the measured starting point, advice_base.sql's row (_advice_base)
w AS (
    SELECT
        coalesce(sum(prompt_reprefill_tokens), 0) AS prompt_reprefill_tokens,
        sum(prompt_reprefill_s) AS prompt_reprefill_s
    FROM _prefill_split_work($run_id, false)
    WHERE step IS NOT NULL AND ($step_lo IS NULL OR step >= $step_lo) AND ($step_hi IS NULL OR step <= $step_hi)
),
first_turns AS (  -- first turns: how much of their prompt the cache served
    SELECT sum(turns) AS first_turns, sum(cached_tokens) / nullif(sum(input_tokens), 0) AS first_turn_cached_share
    FROM _prefill_split($run_id)
    WHERE per_turn_index AND turn_index = 0 AND step IS NOT NULL
      AND ($step_lo IS NULL OR step >= $step_lo) AND ($step_hi IS NULL OR step <= $step_hi)
),
judged AS (
    SELECT
        w.*, f.*,
        -coalesce(w.prompt_reprefill_s, 0) AS d_rollout_s,
        w.prompt_reprefill_s > 0 AS applies,
        CASE
            WHEN w.prompt_reprefill_tokens = 0 THEN 'no group member prefilled its task prompt again'
            WHEN coalesce(w.prompt_reprefill_s, 0) = 0 THEN 'no turn recorded its prefill time (prefill_time_s)'
        END AS why_not,
        'prompt_reprefill_tokens' AS metric,
        w.prompt_reprefill_tokens::DOUBLE AS before,
        0.0 AS after,
        b.usable::DOUBLE AS usable_after
    FROM w, first_turns AS f, b
)
SELECT 'prompt_sharing' AS lever, j.*,
    _advice_change(CASE WHEN j.applies THEN j.usable_after END, j.d_rollout_s, 0.0, 0.0) AS _change
FROM judged AS j
