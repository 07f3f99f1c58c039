-- Rollouts of one run matching the Rollouts page's filters, newest first, with the train step that consumed
-- each as the analyses count it (rollout_steps: its first rl.sample, else inferred from the trainer's timing
-- in a run that records none; NULL = not consumed yet). NULL filters match everything; a step filter keeps
-- only consumed rollouts, as the analyses do. Without a step filter only the newest $limit rollouts are
-- looked up in samples. turns, decoded_tokens and new_prefill_tokens sum the rollout's turns (as the per-rollout
-- work, _rollout_work, keeps them). $lost_at / $lost_reason keep the rollouts the funnel lost at that stage and
-- for that reason, as funnel_losses.sql names them (the Funnel page's examples link here).
WITH filtered AS NOT MATERIALIZED (
    SELECT *
    FROM rollouts AS r
    WHERE r.run_id = $run_id
      AND ($environment IS NULL OR r.environment = $environment)
      AND ($status IS NULL OR r.rollout_status = $status)
      AND ($text IS NULL OR r.rollout_id ILIKE '%' || $text || '%' OR r.task_id ILIKE '%' || $text || '%')
      AND ($reward_min IS NULL OR r.reward >= $reward_min)
      AND ($reward_max IS NULL OR r.reward <= $reward_max)
      AND (($lost_at IS NULL AND $lost_reason IS NULL) OR r.rollout_id IN (
          SELECT rollout_id FROM rollout_stages($run_id)  -- the stage it was lost at ('usable': none) and why
          WHERE ($lost_at IS NULL OR coalesce(lost_at, 'usable') = $lost_at)
            AND ($lost_reason IS NULL OR _loss_reason(lost_reason, group_id) = $lost_reason)
      ))
),
-- Without a step filter, the newest $limit matches start at or after this: found from start_ns (and the filters'
-- columns) alone, so the rows below are read only from the row groups that can hold them (the per-rollout
-- table's parts are in step order, their row groups keep time ranges), not every rollout's ids and strings.
newest AS MATERIALIZED (
    SELECT min(start_ns) AS start_ns
    FROM (SELECT start_ns FROM filtered ORDER BY start_ns DESC LIMIT $limit)
    WHERE $step_lo IS NULL AND $step_hi IS NULL
),
matched AS MATERIALIZED (
    SELECT
        r.rollout_id, r.environment, r.task_id, r.group_id, r.rollout_status, r.reward, r.policy_version,
        r.start_time, r.duration_s, r.start_ns, r.end_ns
    FROM filtered AS r
    WHERE r.start_ns >= coalesce((SELECT start_ns FROM newest), -9223372036854775808)
    ORDER BY r.start_ns DESC, r.rollout_id
    LIMIT CASE WHEN $step_lo IS NULL AND $step_hi IS NULL THEN $limit END
),
consumed AS (  -- derived, per rollout: nothing here reads the raw spans
    SELECT rollout_id, step AS train_step, decision AS sample_decision, staleness AS sample_staleness
    FROM rollout_steps($run_id)
    WHERE rollout_id IN (SELECT rollout_id FROM matched)
),
work AS (
    SELECT rollout_id, turns, generated AS decoded_tokens, new_prefill AS new_prefill_tokens
    FROM _rollout_work($run_id)
    WHERE rollout_id IN (SELECT rollout_id FROM matched) AND turns > 0
      -- Their turns start while they run (a minute each side, $skew_ns, for clock skew, as window.sql): the
      -- per-rollout table's row groups keep time ranges, so this reads those of the rollouts found, not the run's.
      AND first_turn_ns BETWEEN (SELECT min(start_ns) FROM matched) - $skew_ns
                            AND (SELECT max(end_ns) FROM matched) + $skew_ns
)
SELECT
    m.rollout_id, m.environment, m.task_id, m.group_id, m.rollout_status, m.reward, m.policy_version,
    c.train_step, c.sample_decision, c.sample_staleness, m.start_time, m.duration_s,
    coalesce(w.turns, 0) AS turns, w.decoded_tokens, w.new_prefill_tokens
FROM matched AS m
LEFT JOIN consumed AS c USING (rollout_id)
LEFT JOIN work AS w USING (rollout_id)
WHERE ($step_lo IS NULL OR c.train_step >= $step_lo)
  AND ($step_hi IS NULL OR c.train_step <= $step_hi)
ORDER BY m.start_ns DESC, m.rollout_id
LIMIT $limit
