-- Transcript flags (docs/metrics.md, "Transcript flags"): of the consumed rollouts with replies in the messages
-- dataset, how many had a reply cut at the token limit (truncated), completed without a readable final answer
-- (answer_missing), had a reply ending in a loop (looping) or a failed tool call (tool_error_rollouts; and the
-- failed calls, tool_errors); with each as a share of those rollouts. For the run or per consuming step ($by);
-- counted from the rollouts per step and environment kept ahead (_flag_sums, macros/11_transcript_flags.sql):
-- no message is read.
SELECT
    CASE WHEN $by = 'step' THEN step END AS step,
    sum(rollouts)::BIGINT AS rollouts,
    sum(truncated)::BIGINT AS truncated,
    sum(answer_missing)::BIGINT AS answer_missing,
    sum(looping)::BIGINT AS looping,
    sum(tool_error_rollouts)::BIGINT AS tool_error_rollouts,
    sum(tool_errors)::BIGINT AS tool_errors,
    sum(truncated) / sum(rollouts) AS truncated_share,
    sum(answer_missing) / sum(rollouts) AS answer_missing_share,
    sum(looping) / sum(rollouts) AS looping_share,
    sum(tool_error_rollouts) / sum(rollouts) AS tool_error_share
FROM _flag_sums($run_id)
WHERE step IS NOT NULL
  AND ($step_lo IS NULL OR step >= $step_lo)
  AND ($step_hi IS NULL OR step <= $step_hi)
  AND ($environment IS NULL OR environment = $environment)
GROUP BY 1
HAVING sum(rollouts) > 0
ORDER BY 1
