-- Is it learning (docs/metrics.md, "Learning") and what the advisor reads (docs/advisor.md), kept per step like
-- the aggregates of 07_step_aggregates.sql: a step's rows come from the rollouts that step consumed (NULL: not
-- consumed yet), a few per step, so learning.sql, task_solve_rates.sql, zero_signal.sql, mismatch.sql,
-- staleness_timing.sql, stale_bias.sql and the advisor read no table that grows with the run's rollouts or turns.
-- Values a figure takes percentiles or thresholds of are kept as counts per distinct value, which is exact: a
-- percentile or a share at any threshold of the values equals the one of the counted values.
-- Each _<name>_src(run) is the definition over the per-rollout tables; _<name>(run) is what the analyses read
-- (a reader points it at the store's derived table, queries/tables.py).

-- _reward_counts_src(run): scored rollouts (a reward recorded) per consuming step, environment, task and reward
-- value: learning.sql's mean, exact percentiles and success rate, task_solve_rates.sql's attempts and successes
-- at any threshold. 0/1 rewards make two rows per step and task.
CREATE OR REPLACE MACRO _reward_counts_src(run) AS TABLE
SELECT step, environment, task_id AS task, reward, count(*) AS scored
FROM rollout_stages(run)
WHERE scored AND reward IS NOT NULL
GROUP BY ALL;
CREATE OR REPLACE MACRO _reward_counts(run) AS TABLE SELECT * FROM _reward_counts_src(run);

-- _reward_steps_src(run): the scored rollouts of each consuming step, over every environment (all_environments;
-- environment NULL) and per environment, with their rewards' 10th / 50th / 90th percentiles (quantile_cont:
-- linear interpolation, numpy's default). A step's percentiles are taken over that step's rollouts alone, so they
-- are kept whole per step, as staleness_timing's are: learning.sql's by step reads them rather than ordering
-- each step's counted values again (0.06 against 0.31 CPU-s at 30M spans, 34,320 steps); a range of steps or the
-- whole run still takes its percentiles from _reward_counts.
CREATE OR REPLACE MACRO _reward_steps_src(run) AS TABLE
SELECT
    step,
    GROUPING(environment) = 1 AS all_environments,
    environment,
    count(*) AS scored,
    quantile_cont(reward, 0.1) AS reward_p10,
    quantile_cont(reward, 0.5) AS reward_p50,
    quantile_cont(reward, 0.9) AS reward_p90
FROM rollout_stages(run)
WHERE scored AND reward IS NOT NULL AND step IS NOT NULL
GROUP BY GROUPING SETS ((step), (step, environment));
CREATE OR REPLACE MACRO _reward_steps(run) AS TABLE SELECT * FROM _reward_steps_src(run);

-- _solve_status(successes, attempts): a task's curriculum status from its scored attempts (at least one) and
-- successes: 'always solved' (every one succeeded: too easy, no signal), 'never solved' (none did: too hard,
-- no signal) or 'mixed'. task_solve_rates.sql lists it per task; task_solve_summary.sql counts the tasks of each.
CREATE OR REPLACE MACRO _solve_status(successes, attempts) AS
    CASE WHEN successes = attempts THEN 'always solved' WHEN successes = 0 THEN 'never solved' ELSE 'mixed' END;

-- _zero_signal_sums_src(run): the rollouts lost at the nonzero-signal stage per consuming step, environment, task,
-- group and the group's kind (zero_signal.sql): all_wrong (its scored rewards all equal, at most 0), all_right
-- (all equal, at least 1), other_equal (all equal in between, or the trainer's own zero-signal call on rewards
-- that vary), group_too_small (fewer than two scored attempts). Groups are judged over the whole run, as
-- rollout_stages judges their signal. group_id NULL: rollouts of no group, each a group of its own.
CREATE OR REPLACE MACRO _zero_signal_sums_src(run) AS TABLE
WITH groups AS (
    SELECT group_id, count(*) AS n, min(reward) AS lo, max(reward) AS hi
    FROM rollout_stages(run)
    WHERE scored AND reward IS NOT NULL AND group_id IS NOT NULL
    GROUP BY group_id
)
SELECT
    l.step, l.environment, l.task_id AS task, l.group_id,
    CASE
        WHEN coalesce(g.n, 0) < 2 THEN 'group_too_small'
        WHEN g.lo = g.hi AND g.hi <= 0 THEN 'all_wrong'
        WHEN g.lo = g.hi AND g.lo >= 1 THEN 'all_right'
        ELSE 'other_equal'
    END AS kind,
    count(*) AS rollouts
FROM rollout_stages(run) AS l
LEFT JOIN groups AS g USING (group_id)
WHERE l.lost_at = 'nonzero_signal'
GROUP BY ALL;
CREATE OR REPLACE MACRO _zero_signal_sums(run) AS TABLE SELECT * FROM _zero_signal_sums_src(run);

-- _mismatch_sums_src(run): the samples whose rl.sample recorded a train-inference mismatch figure, per consuming
-- step and environment: how many, and per figure how many recorded it, their sum and (for the maxima) largest
-- (mismatch.sql takes means as sum / count, as avg does).
CREATE OR REPLACE MACRO _mismatch_sums_src(run) AS TABLE
SELECT
    step, environment,
    count(*) AS samples,
    count(mismatch_kl) AS mismatch_kl_n,
    sum(mismatch_kl) AS mismatch_kl_sum,
    max(mismatch_kl) AS mismatch_kl_max,
    count(logprob_diff_mean) AS logprob_diff_mean_n,
    sum(logprob_diff_mean) AS logprob_diff_mean_sum,
    max(logprob_diff_max) AS logprob_diff_max,
    count(importance_ratio_mean) AS importance_ratio_mean_n,
    sum(importance_ratio_mean) AS importance_ratio_mean_sum
FROM rollout_steps(run)
WHERE coalesce(mismatch_kl, logprob_diff_mean, logprob_diff_max, importance_ratio_mean) IS NOT NULL
GROUP BY ALL;
CREATE OR REPLACE MACRO _mismatch_sums(run) AS TABLE SELECT * FROM _mismatch_sums_src(run);

-- _staleness_timing_src(run): staleness_timing.sql's figures per consuming step, over every environment
-- (all_environments; environment NULL) and per environment: each step's are taken over that step's consumed
-- samples alone, so they are kept whole, percentiles included. In flight: from the rollout's dispatch (its
-- span's start) to its end, in seconds, and in policy versions produced meanwhile (the newest version a finished
-- train step had produced by the rollout's end, less the rollout's policy_version). Queued: from its end to its
-- consuming step's data being ready (start + train_wait_s), in seconds, and the rest of its staleness in versions.
CREATE OR REPLACE MACRO _staleness_timing_src(run) AS TABLE
WITH consumed AS (
    SELECT s.rollout_id, s.step, s.environment, s.staleness, s.policy_version, r.start_ns, r.end_ns
    FROM rollout_steps(run) AS s
    JOIN rollouts AS r ON r.run_id = run AND r.rollout_id = s.rollout_id
    WHERE s.step IS NOT NULL AND s.staleness IS NOT NULL
),
train AS (
    SELECT train_step, end_ns, policy_version, ready_ns FROM _steps(run)
),
produced AS (  -- the newest version produced by a train step that had ended by the rollout's end
    SELECT c.*, t.policy_version AS newest_version
    FROM consumed AS c
    ASOF LEFT JOIN (SELECT end_ns, policy_version FROM train WHERE policy_version IS NOT NULL) AS t
        ON c.end_ns >= t.end_ns
),
split AS (
    SELECT
        p.step, p.environment,
        (p.end_ns - p.start_ns) / 1e9 AS in_flight_s,
        greatest(0, t.ready_ns - p.end_ns) / 1e9 AS queued_s,
        least(p.staleness, greatest(0, coalesce(p.newest_version, p.policy_version) - p.policy_version))
            AS in_flight_versions,
        p.staleness
    FROM produced AS p
    LEFT JOIN train AS t ON t.train_step = p.step
)
SELECT
    step,
    GROUPING(environment) = 1 AS all_environments,
    environment,
    count(*) AS samples,
    avg(in_flight_s) AS in_flight_s_mean,
    quantile_cont(in_flight_s, 0.9) AS in_flight_s_p90,
    avg(queued_s) AS queued_s_mean,
    quantile_cont(queued_s, 0.9) AS queued_s_p90,
    avg(staleness) AS staleness_mean,
    avg(in_flight_versions) AS in_flight_versions_mean,
    avg(staleness - in_flight_versions) AS queued_versions_mean
FROM split
GROUP BY GROUPING SETS ((step), (step, environment));
CREATE OR REPLACE MACRO _staleness_timing(run) AS TABLE SELECT * FROM _staleness_timing_src(run);

-- _stale_bias_sums_src(run): rollouts that carried a signal, kept (usable) or dropped for staleness (lost at the
-- fresh stage as 'stale'), per consuming step, environment and reward value (stale_bias.sql: a success rate at
-- any threshold): how many, and the counts and sums of their decoded tokens and seconds from dispatch to end.
CREATE OR REPLACE MACRO _stale_bias_sums_src(run) AS TABLE
SELECT
    s.step, s.environment, s.usable AS kept, s.reward,
    count(*) AS rollouts,
    count(w.generated) AS generated_n,
    sum(w.generated)::BIGINT AS generated_sum,
    count(r.end_ns - r.start_ns) AS duration_n,
    sum((r.end_ns - r.start_ns) / 1e9) AS duration_s_sum
FROM rollout_stages(run) AS s
JOIN rollouts AS r ON r.run_id = run AND r.rollout_id = s.rollout_id
LEFT JOIN _rollout_work(run) AS w ON w.rollout_id = s.rollout_id
WHERE s.usable OR (s.lost_at = 'fresh' AND s.lost_reason = 'stale')
GROUP BY ALL;
CREATE OR REPLACE MACRO _stale_bias_sums(run) AS TABLE SELECT * FROM _stale_bias_sums_src(run);

-- The advisor's per-step tables (10_advice.sql and the advice_*.sql levers read them).

-- _advice_group_sums_src(run): per consuming step and group of rollouts, its environment and task, its dispatched,
-- completed and scored members, those with a reward, those that succeeded (reward ≥ 0.5, rewards in [0, 1]), the
-- nonzero-signal ones, and the lowest and highest reward of its scored members. A group consumed over several
-- steps has a row per step; the advisor sums them over the steps it reads.
CREATE OR REPLACE MACRO _advice_group_sums_src(run) AS TABLE
SELECT
    step, group_id,
    any_value(environment) AS environment,
    any_value(task_id) FILTER (scored AND reward IS NOT NULL) AS task,
    count(*) AS dispatched,
    count(*) FILTER (completed) AS completed,
    count(*) FILTER (scored) AS scored,
    count(*) FILTER (scored AND reward IS NOT NULL) AS rewarded,
    count(*) FILTER (scored AND reward >= 0.5) AS successes,
    count(*) FILTER (nonzero_signal) AS signal,
    min(reward) FILTER (scored) AS reward_lo,
    max(reward) FILTER (scored) AS reward_hi
FROM rollout_stages(run)
WHERE group_id IS NOT NULL
GROUP BY step, group_id;
CREATE OR REPLACE MACRO _advice_group_sums(run) AS TABLE SELECT * FROM _advice_group_sums_src(run);

-- _judge_sums_src(run): judge calls on completed rollouts per consuming step, environment and whether the
-- rollout's scoring failed for its judge (lost as 'judge timeout' or 'judge error'): how many, and their span
-- nanoseconds (the scoring lever's judge seconds).
CREATE OR REPLACE MACRO _judge_sums_src(run) AS TABLE
SELECT
    s.step, s.environment,
    s.lost_reason IN ('judge timeout', 'judge error') AS judge_failed,
    count(*) AS calls,
    sum(w.end_ns - w.start_ns)::BIGINT AS judge_ns
FROM _compute_work(run) AS w
JOIN rollout_stages(run) AS s USING (rollout_id)
WHERE w.term = 'judge' AND s.completed
GROUP BY ALL;
CREATE OR REPLACE MACRO _judge_sums(run) AS TABLE SELECT * FROM _judge_sums_src(run);

-- _advice_spec_sums_src(run): the turn groups of _turn_sums in which every turn drafted (spec_turns = turns, with
-- verify steps), summed per consuming step, environment, k, rollout-length bucket, drafter version, the policy
-- version it was built from and the policy versions since (drafter_refresh and spec_budget levers). weighted_s
-- is Σ decode seconds × tokens per verify step over those turn groups, so the drafter lever's saving
-- Σ decode seconds × (E / E0 − 1) = weighted_s / E0 − decode seconds is exact when summed. One step's integer
-- sums fit in BIGINT.
CREATE OR REPLACE MACRO _advice_spec_sums_src(run) AS TABLE
SELECT
    step, environment, spec_k, length_bucket, drafter_version, drafter_policy_version,
    policy_version - drafter_policy_version AS since,
    sum(decode_tokens)::BIGINT AS decode_tokens,
    sum(verify_steps)::BIGINT AS verify_steps,
    sum(decode_ns)::BIGINT AS decode_ns,
    sum(drafted)::BIGINT AS drafted,
    sum(accepted)::BIGINT AS accepted,
    sum(decode_ns / 1e9 * (decode_tokens / verify_steps)) AS weighted_s
FROM _turn_sums(run)
WHERE spec_turns = turns AND spec_turns > 0 AND verify_steps > 0
GROUP BY ALL;
CREATE OR REPLACE MACRO _advice_spec_sums(run) AS TABLE SELECT * FROM _advice_spec_sums_src(run);
