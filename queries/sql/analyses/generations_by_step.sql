-- Per consuming train step (docs/metrics.md, "Generations and rewards per step"): rollouts trained on, mean
-- decoded tokens per rollout (the sum of its turns' output_tokens) and the clipped share (rollouts whose last
-- turn stopped at the length limit: gen_ai.response.finish_reasons holds "length"). For a TRL run these are
-- completions/mean_length and completions/clipped_ratio of the step TRL logs as step + 1.
WITH consumed AS (
    SELECT rollout_id, step
    FROM rollout_steps($run_id)
    WHERE step IS NOT NULL
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
per_rollout AS (
    SELECT
        rollout_id,
        sum(output_tokens) AS output_tokens,
        arg_max(
            coalesce(json_contains(attributes -> '$."gen_ai.response.finish_reasons"', '"length"'), false),
            coalesce(turn_index, 0)
        ) AS clipped
    FROM turns
    WHERE run_id = $run_id AND rollout_id IS NOT NULL
    GROUP BY rollout_id
)
SELECT
    c.step,
    count(*) AS rollouts,
    avg(p.output_tokens) AS mean_output_tokens,
    avg(CASE WHEN p.clipped THEN 1.0 ELSE 0.0 END) AS clipped_share
FROM consumed AS c
JOIN per_rollout AS p USING (rollout_id)
GROUP BY c.step
ORDER BY c.step
