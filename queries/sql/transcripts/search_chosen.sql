-- The rollouts a text search's walk looks in (queries/text_search.py; search.sql's filters, _search_rollouts),
-- each with lo_ns, the earliest its messages can start: a minute ($skew_ns) before its rl.rollout span, as
-- window.sql allows for clock skew (NULL for a rollout without that span: no bound). The walk reads no row
-- group that ends before every chosen rollout's lo_ns, and completes a rollout's hits from its lo_ns on.
SELECT c.*, r.start_ns - $skew_ns AS lo_ns
FROM _search_rollouts($run_id, $environment, $status, $text, $step_lo, $step_hi, $reward_min, $reward_max,
                      $lost_at, $lost_reason, $finish_reason) AS c
LEFT JOIN (
    SELECT rollout_id, min(start_ns) AS start_ns FROM rollouts WHERE run_id = $run_id GROUP BY rollout_id
) AS r USING (rollout_id)
