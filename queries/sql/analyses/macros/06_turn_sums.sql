-- _turns_stepped(run): the run's turns with the train step that consumed each one's rollout (NULL: not
-- consumed yet, or a turn of no known rollout), for analyses that filter or group turns by step.
-- A reader reads the step kept with each derived turn (queries/tables.py), so it joins nothing.
CREATE OR REPLACE MACRO _turns_stepped(run) AS TABLE
SELECT t.*, c.step
FROM turns AS t
LEFT JOIN (SELECT rollout_id, step FROM rollout_steps(run)) AS c USING (rollout_id)
WHERE t.run_id = run;
-- _turns_stepped_src(run): the derived turns' definition (queries/tables.py), the same rows without run_id, over
-- the turns' own definition (a derivation points turns at the derived rows being filled).
CREATE OR REPLACE MACRO _turns_stepped_src(run) AS TABLE
SELECT t.* EXCLUDE (run_id), c.step
FROM _turns_src AS t
LEFT JOIN (SELECT rollout_id, step FROM rollout_steps(run)) AS c USING (rollout_id)
WHERE t.run_id = run;
-- _turn_sums_src(run, steps): the turns' tokens, times and speculative-decoding counts summed per consuming
-- step, environment, turn index, policy and drafter versions, speculative budget k and rollout-length bucket
-- (the rollout's decoded tokens rounded down to a power of two), with the largest model: every key prefill_decode.sql, spec_decode.sql,
-- spec_drift.sql and disaggregation.sql group or filter turns by, so they read thousands of rows, not millions
-- of turns. Speculative sums count turns that drafted (spec_draft_tokens set), as α = accepted / drafted does.
-- steps: a list of consuming steps, NULL for all; the pending turns (step NULL) always come too, as every
-- refresh can change them. Sums are integers (times in nanoseconds), so the stored sums, summed in
-- arrival order, equal a fresh one's exactly.
CREATE OR REPLACE MACRO _turn_sums_src(run, steps) AS TABLE
SELECT
    t.step, t.environment, t.turn_index, t.policy_version, t.drafter_version, t.drafter_policy_version, t.spec_k,
    CAST(pow(2, floor(log2(greatest(t.decoded, 1)))) AS BIGINT) AS length_bucket,
    count(*) AS turns,
    -- one step's sums per key fit in BIGINT, which reads ~3x faster than the HUGEINT sum() gives
    sum(t.new_input_tokens)::BIGINT AS new_prefill_tokens,
    sum(t.cached_input_tokens)::BIGINT AS cached_prefill_tokens,
    sum(t.input_tokens)::BIGINT AS input_tokens,
    sum(t.output_tokens)::BIGINT AS decode_tokens,
    sum(greatest(0, coalesce(t.context_tokens, 0) - coalesce(t.cached_input_tokens, 0)))::BIGINT
        AS reprefill_waste_tokens,
    sum(CAST(round(t.prefill_time_s * 1e9) AS BIGINT))::BIGINT AS prefill_ns,
    sum(CAST(round(t.decode_time_s * 1e9) AS BIGINT))::BIGINT AS decode_ns,
    count(t.spec_draft_tokens) AS spec_turns,
    sum(t.spec_draft_tokens)::BIGINT AS drafted,
    sum(t.spec_accepted_tokens) FILTER (t.spec_draft_tokens IS NOT NULL)::BIGINT AS accepted,
    sum(t.spec_verify_steps) FILTER (t.spec_draft_tokens IS NOT NULL)::BIGINT AS verify_steps,
    max(t.model_parameters) AS model_parameters
FROM (
    -- a rollout's turns share its step, so the selected steps hold every turn of their rollouts
    SELECT
        *,
        CASE WHEN rollout_id IS NOT NULL THEN sum(output_tokens) OVER (PARTITION BY rollout_id) END AS decoded
    FROM _turns_stepped(run)
    WHERE steps IS NULL OR step IS NULL OR list_contains(steps, step)
) AS t
GROUP BY ALL;
-- The name the analyses read; a reader reads the store's derived table (queries/tables.py).
CREATE OR REPLACE MACRO _turn_sums(run) AS TABLE SELECT * FROM _turn_sums_src(run, NULL);
