-- The work around a training token (docs/metrics.md): for usable rollouts, per generated (output) token, how
-- often it was generated, prefilled again in later turns, evaluated by the trainer (the sample's tokens,
-- else the rollout's final context) and scored by a teacher; and the share of rollout + judge + teacher
-- FLOPs spent on rollouts that never became usable.
-- Speed: turn, teacher and judge spans are summed straight into the totals after one join with their
-- rollout's stage, rather than each grouped per rollout and joined apart; only the final context (a max per
-- rollout) is grouped, and only for usable rollouts without a sample's token count.
WITH stages AS (
    SELECT rollout_id, usable, sample_tokens
    FROM rollout_stages($run_id)
    WHERE ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
work AS (
    SELECT
        rollout_id,
        output_tokens AS generated,
        greatest(0, coalesce(context_tokens, 0) - coalesce(cached_input_tokens, 0)) AS reprefilled,
        NULL::BIGINT AS teacher_scored,
        2 * model_parameters::DOUBLE * (coalesce(new_input_tokens, 0) + coalesce(output_tokens, 0)) AS flops
    FROM turns
    WHERE run_id = $run_id
    UNION ALL
    SELECT rollout_id, NULL, NULL, teacher_tokens, 2 * parameters::DOUBLE * coalesce(teacher_tokens, 0)
    FROM teachers
    WHERE run_id = $run_id
    UNION ALL
    SELECT
        rollout_id, NULL, NULL, NULL,
        2 * parameters::DOUBLE * (coalesce(input_tokens, 0) + coalesce(output_tokens, 0))
    FROM judges
    WHERE run_id = $run_id
),
work_totals AS (
    SELECT
        sum(w.generated) FILTER (s.usable) AS usable_tokens,
        sum(w.reprefilled) FILTER (s.usable) AS reprefill_waste_tokens,
        sum(w.teacher_scored) FILTER (s.usable) AS teacher_tokens,
        sum(w.generated) AS generated_tokens,
        sum(w.flops) FILTER (NOT s.usable) AS wasted_flops,
        sum(w.flops) AS flops
    FROM work AS w
    JOIN stages AS s USING (rollout_id)
),
final_contexts AS (  -- trained tokens of usable rollouts the trainer recorded no token count for
    SELECT sum(c.final_context) AS tokens
    FROM stages AS s
    JOIN (
        SELECT rollout_id, max(coalesce(input_tokens, 0) + coalesce(output_tokens, 0)) AS final_context
        FROM turns
        WHERE run_id = $run_id
          AND rollout_id IN (SELECT rollout_id FROM stages WHERE usable AND sample_tokens IS NULL)
        GROUP BY rollout_id
    ) AS c USING (rollout_id)
    WHERE s.usable AND s.sample_tokens IS NULL
),
stage_totals AS (
    SELECT
        count(*) AS rollouts,
        count(*) FILTER (usable) AS usable,
        count(*) FILTER (NOT usable) AS not_usable,
        sum(sample_tokens) FILTER (usable) AS sample_tokens
    FROM stages
),
totals AS (  -- a rollout without turns, teachers or judges adds 0; no rollout at all leaves a sum NULL
    SELECT
        CASE WHEN n.usable > 0 THEN coalesce(w.usable_tokens, 0) END::BIGINT AS usable_tokens,
        CASE WHEN n.usable > 0 THEN coalesce(w.reprefill_waste_tokens, 0) END::BIGINT AS reprefill_waste_tokens,
        CASE WHEN n.usable > 0 THEN coalesce(n.sample_tokens, 0) + coalesce(c.tokens, 0) END::BIGINT
            AS train_tokens,
        CASE WHEN n.usable > 0 THEN coalesce(w.teacher_tokens, 0) END::BIGINT AS teacher_tokens,
        CASE WHEN n.rollouts > 0 THEN coalesce(w.generated_tokens, 0) END::BIGINT AS generated_tokens,
        CASE WHEN n.not_usable > 0 THEN coalesce(w.wasted_flops, 0) END AS wasted_flops,
        CASE WHEN n.rollouts > 0 THEN coalesce(w.flops, 0) END AS flops
    FROM work_totals AS w, final_contexts AS c, stage_totals AS n
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
