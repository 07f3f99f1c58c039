-- The work around a training token (docs/metrics.md): for usable rollouts, per generated (output) token, how
-- often it was generated, prefilled again in later turns, evaluated by the trainer (the sample's tokens,
-- else the rollout's final context) and scored by a teacher; and the share of rollout + judge + teacher
-- FLOPs spent on rollouts that never became usable. Per-rollout sums and stages come from _rollout_work
-- (macros/05), summed ahead per step, environment and usable flag (_rollout_sums, macros/07).
WITH per_rollout AS (
    SELECT usable, generated, reprefilled, trained, teacher_scored, flops
    FROM _rollout_sums($run_id)
    WHERE known
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
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
