-- The work around a training token (docs/metrics.md): for usable rollouts, per generated (output) token, how
-- often it was generated, prefilled again in later turns, evaluated by the trainer (the sample's tokens,
-- else the rollout's final context) and scored by a teacher; and the share of rollout + judge + teacher
-- FLOPs spent on rollouts that never became usable.
WITH stages AS (
    SELECT rollout_id, usable, sample_tokens
    FROM rollout_stages($run_id)
    WHERE ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
turn_work AS (
    SELECT
        rollout_id,
        sum(output_tokens) AS generated,
        sum(greatest(0, coalesce(context_tokens, 0) - coalesce(cached_input_tokens, 0))) AS reprefilled,
        max(coalesce(input_tokens, 0) + coalesce(output_tokens, 0)) AS final_context,
        sum(2.0 * model_parameters * (coalesce(new_input_tokens, 0) + coalesce(output_tokens, 0))) AS flops
    FROM turns
    WHERE run_id = $run_id
    GROUP BY rollout_id
),
teacher_work AS (
    SELECT rollout_id, sum(teacher_tokens) AS scored, sum(2.0 * parameters * coalesce(teacher_tokens, 0)) AS flops
    FROM teachers
    WHERE run_id = $run_id
    GROUP BY rollout_id
),
judge_work AS (
    SELECT rollout_id, sum(2.0 * parameters * (coalesce(input_tokens, 0) + coalesce(output_tokens, 0))) AS flops
    FROM judges
    WHERE run_id = $run_id
    GROUP BY rollout_id
),
per_rollout AS (
    SELECT
        s.usable,
        coalesce(t.generated, 0) AS generated,
        coalesce(t.reprefilled, 0) AS reprefilled,
        coalesce(s.sample_tokens, t.final_context, 0) AS trained,
        coalesce(x.scored, 0) AS teacher_scored,
        coalesce(t.flops, 0) + coalesce(x.flops, 0) + coalesce(j.flops, 0) AS flops
    FROM stages AS s
    LEFT JOIN turn_work AS t USING (rollout_id)
    LEFT JOIN teacher_work AS x USING (rollout_id)
    LEFT JOIN judge_work AS j USING (rollout_id)
),
totals AS (
    SELECT
        sum(generated) FILTER (usable)::BIGINT AS usable_tokens,
        sum(reprefilled) FILTER (usable)::BIGINT AS reprefill_waste_tokens,
        sum(trained) FILTER (usable)::BIGINT AS train_tokens,
        sum(teacher_scored) FILTER (usable)::BIGINT AS teacher_tokens,
        sum(generated)::BIGINT AS generated_tokens,
        sum(flops) FILTER (NOT usable) AS wasted_flops,
        sum(flops) AS flops
    FROM per_rollout
)
SELECT
    usable_tokens,
    reprefill_waste_tokens,
    train_tokens,
    teacher_tokens,
    generated_tokens,
    CASE WHEN usable_tokens > 0 THEN 1.0 END AS generated,
    reprefill_waste_tokens / nullif(usable_tokens, 0) AS reprefilled,
    train_tokens / nullif(usable_tokens, 0) AS trained,
    teacher_tokens / nullif(usable_tokens, 0) AS teacher_scored,
    generated_tokens / nullif(usable_tokens, 0) AS generated_per_usable_token,
    wasted_flops / nullif(flops, 0) AS wasted_compute_share
FROM totals
