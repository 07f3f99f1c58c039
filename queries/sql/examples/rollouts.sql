-- Example rollouts of one selection (docs/transcripts.md, "Examples"): the rollouts a funnel loss, a check or an
-- advisor lever rests on, for a reader to open and see what happened. $kind picks them, from the rollouts'
-- funnel stages (rollout_stages) and work (_rollout_work):
--   lost         lost at stage $lost_at ('usable': not lost), for $lost_reason when given (funnel_losses.sql's)
--   all_wrong    lost at nonzero signal in a group whose scored rewards are all equal and at most 0 (too hard)
--   all_right    ... all equal and at least 1 (too easy; zero_signal.sql's kinds)
--   reprefilled  history prefilled again (context - cached tokens), most first
--   long         at least $min_tokens decoded, most first
--   new_prefill  new prefill tokens, most first
--   tool_wait    time in tool calls, most first
--   mismatch     the train-inference KL its sample recorded, largest first
-- One row per rollout of the selection, with the figure it ranks by (value; NULL for the unranked);
-- examples/ranked.sql filters and picks the examples.
WITH scored_groups AS (  -- each group's scored rewards, over the whole run (as rollout_stages judges signal)
    SELECT group_id, min(reward) AS lo, max(reward) AS hi
    FROM rollout_stages($run_id)
    WHERE $kind IN ('all_wrong', 'all_right') AND scored AND reward IS NOT NULL AND group_id IS NOT NULL
    GROUP BY group_id
    HAVING count(*) >= 2
),
work AS (
    SELECT rollout_id, reprefilled, generated, new_prefill, tool_ns, first_turn_ns
    FROM _rollout_work($run_id)
    WHERE $kind IN ('reprefilled', 'long', 'new_prefill', 'tool_wait')
)
SELECT
    s.rollout_id,
    CASE $kind
        WHEN 'reprefilled' THEN w.reprefilled
        WHEN 'long' THEN w.generated
        WHEN 'new_prefill' THEN w.new_prefill
        WHEN 'tool_wait' THEN w.tool_ns / 1e9
        WHEN 'mismatch' THEN s.mismatch_kl
    END AS value
FROM rollout_stages($run_id) AS s
LEFT JOIN work AS w USING (rollout_id)
LEFT JOIN scored_groups AS g USING (group_id)
WHERE CASE $kind
    WHEN 'lost' THEN coalesce(s.lost_at, 'usable') = $lost_at
        AND ($lost_reason IS NULL OR _loss_reason(s.lost_reason, s.group_id) = $lost_reason)
    WHEN 'all_wrong' THEN s.lost_at = 'nonzero_signal' AND g.lo = g.hi AND g.hi <= 0
    WHEN 'all_right' THEN s.lost_at = 'nonzero_signal' AND g.lo = g.hi AND g.lo >= 1
    WHEN 'reprefilled' THEN w.reprefilled > 0
    WHEN 'long' THEN w.generated >= $min_tokens
    WHEN 'new_prefill' THEN w.new_prefill > 0
    WHEN 'tool_wait' THEN w.tool_ns > 0
    WHEN 'mismatch' THEN s.mismatch_kl IS NOT NULL
END
