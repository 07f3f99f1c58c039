-- Is it stuck (docs/metrics.md, "Health"): the derived tables liveness, scoring latency and goodput read.
--
-- _process_activity_src(run): one row per writing process (service.instance.id): its spans, the start of its
-- first and the end of its last. A process whose last span is old went silent. A process attached in several
-- roles (one service.instance.id) shows the first of its roles and service names by name: any_value would
-- differ from one derivation to the next.
CREATE OR REPLACE MACRO _process_activity_src(run) AS TABLE
SELECT
    instance_id,
    min(service_name) AS service_name,
    min(role) AS role,
    max(devices) AS devices,
    count(*) AS spans,
    min(start_ns) AS first_start_ns,
    max(end_ns) AS last_end_ns
FROM raw_spans
WHERE run_id = run
GROUP BY instance_id;

-- _open_rollouts_src(run): rollouts in flight — a rollout id carried by finished spans (turns, tool calls,
-- scoring) whose rl.rollout span is not in the store yet (a span is written when it ends). Its environment
-- is the rl.environment any of those spans carries (NULL when none does); its first start is the earliest
-- start of those spans, a lower bound of when it was dispatched.
CREATE OR REPLACE MACRO _open_rollouts_src(run) AS TABLE
SELECT
    s.rollout_id,
    max(s.environment) AS environment,
    arg_min(s.instance_id, s.start_ns) AS instance_id,
    count(*) AS spans,
    min(s.start_ns) AS first_start_ns,
    max(s.end_ns) AS last_end_ns
FROM raw_spans AS s
ANTI JOIN (SELECT rollout_id FROM rollouts WHERE run_id = run) AS r ON r.rollout_id = s.rollout_id
WHERE s.run_id = run AND s.rollout_id IS NOT NULL AND s.name NOT IN ('rl.rollout', 'rl.sample')
GROUP BY s.rollout_id;

-- _scoring_src(run): one narrow row per scoring call, stored in step order like _rollout_tails (a percentile needs
-- every value): an rl.reward span (kind 'verifier') or an rl.judge span (kind 'judge'), its latency, whether it
-- timed out (rl.judge.status = 'timeout'), its rollout's environment and consuming train step (NULL until a step
-- consumes it). rollout_id only while no step has consumed the call's rollout (NULL after, nearly free in
-- Parquet): an incremental catch-up takes the pending rollouts into its scope by it (queries/sql/raw/scope.sql),
-- including one whose rl.rollout span has not arrived yet, which no other table names.
CREATE OR REPLACE MACRO _scoring_src(run) AS TABLE
SELECT
    c.step,
    r.environment,
    CASE WHEN s.name = 'rl.judge' THEN 'judge' ELSE 'verifier' END AS kind,
    (s.end_ns - s.start_ns) / 1e9 AS duration_s,
    coalesce(s.judge_status = 'timeout', false) AS timed_out,
    CASE WHEN c.step IS NULL THEN s.rollout_id END AS rollout_id
FROM raw_spans AS s
LEFT JOIN (SELECT rollout_id, environment FROM rollouts WHERE run_id = run) AS r USING (rollout_id)
LEFT JOIN (SELECT rollout_id, step FROM rollout_steps(run)) AS c USING (rollout_id)
WHERE s.run_id = run AND s.name IN ('rl.reward', 'rl.judge');

-- _step_windows(run): each train step's window on the run's clock, from its start to the next step's start;
-- the last step's runs to the end of its own span or of the weight syncs that started after it, whichever is
-- later. Goodput divides time by these windows. A weight sync counts in the window its start falls in, for its
-- time after the step's end: found by an ASOF join (each sync's latest window start), not by joining every step with
-- every sync on a range, which grows with the square of the steps (1.7 s of every catch-up at 11k steps).
-- Overlapping syncs are merged first: where every rank of a data-parallel trainer wraps the weight update
-- (verl's `rl.weight_sync` around the rollout-engine update, NeMo-RL's refit), one sync is several overlapping
-- spans, and summed span by span it would count once per rank: more wait than the window holds.
CREATE OR REPLACE MACRO _step_windows(run) AS TABLE
WITH sync_spans AS (
    SELECT
        start_ns, end_ns,
        -- 1 where a sync starts after every earlier-starting one has ended: the first of a merged interval
        CASE WHEN start_ns <= max(end_ns) OVER earlier THEN 0 ELSE 1 END AS opens
    FROM raw_spans
    WHERE run_id = run AND name = 'rl.weight_sync'
    WINDOW earlier AS (ORDER BY start_ns, end_ns ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
syncs AS (  -- the merged intervals
    SELECT min(start_ns) AS start_ns, max(end_ns) AS end_ns
    FROM (
        SELECT *, sum(opens) OVER (ORDER BY start_ns, end_ns ROWS UNBOUNDED PRECEDING) AS interval_no
        FROM sync_spans
    )
    GROUP BY interval_no
),
steps AS (
    SELECT
        train_step AS step, start_ns, end_ns, coalesce(train_wait_s, 0) AS wait_s,
        lead(start_ns) OVER w AS next_start_ns, row_number() OVER w AS i
    FROM _steps(run)
    WINDOW w AS (ORDER BY start_ns)
),
opened AS (  -- the windows that hold time: from the first step on, they partition the clock
    SELECT * FROM steps WHERE next_start_ns IS NULL OR next_start_ns > start_ns
),
synced AS (
    SELECT
        st.i,
        sum(least(sy.end_ns, coalesce(st.next_start_ns, sy.end_ns)) - greatest(sy.start_ns, st.end_ns)) AS sync_ns,
        max(sy.end_ns) AS sync_end_ns
    FROM syncs AS sy
    ASOF JOIN opened AS st ON sy.start_ns >= st.start_ns
    WHERE sy.end_ns > st.end_ns  -- the part after the step's end: ranks end a step at their own moments
    GROUP BY st.i
)
SELECT
    st.step, st.start_ns, st.end_ns, st.wait_s,
    coalesce(st.next_start_ns, greatest(st.end_ns, max(sy.sync_end_ns))) AS window_end_ns,
    coalesce(sum(sy.sync_ns), 0) AS sync_ns
FROM steps AS st
LEFT JOIN synced AS sy USING (i)
GROUP BY st.step, st.start_ns, st.end_ns, st.wait_s, st.next_start_ns;

-- _trainer_goodput_src(run): the trainer's time per step window: computing (its step span less the wait it
-- recorded), waiting for data (rl.train.wait_s), waiting on weight sync (rl.weight_sync spans after the step,
-- before the next one starts) and other (the rest of the window: gaps no span covers).
CREATE OR REPLACE MACRO _trainer_goodput_src(run) AS TABLE
SELECT
    step,
    (window_end_ns - start_ns) / 1e9 AS window_s,
    (end_ns - start_ns) / 1e9 - wait_s AS computing_s,
    wait_s AS data_wait_s,
    sync_ns / 1e9 AS sync_wait_s,
    (window_end_ns - start_ns) / 1e9 - (end_ns - start_ns) / 1e9 - sync_ns / 1e9 AS other_s
FROM _step_windows(run);

-- _rollout_goodput_src(run): each rollout process's time (a process that emitted rl.turn spans), per step
-- window (step NULL: time outside every window, before the first step or after the last), split into states
-- that take precedence in this order:
--   generating       at least one of its turns running;
--   weights_wait     none running while a weight sync (rl.weight_sync, any process) is under way;
--   tools_wait       none running, no sync, but one of its rollouts in flight (waiting on tools, scoring, a queue);
--   idle             nothing of the above.
-- The process's time spans from its first to its last turn or rollout span. devices is rl.compute.devices.
CREATE OR REPLACE MACRO _rollout_goodput_src(run) AS TABLE
WITH procs AS (
    SELECT instance_id, max(devices) AS devices
    FROM raw_spans
    WHERE run_id = run AND name = 'rl.turn' AND instance_id IS NOT NULL
    GROUP BY instance_id
),
work AS (
    SELECT s.instance_id, s.name, s.start_ns, s.end_ns
    FROM raw_spans AS s
    SEMI JOIN procs AS p ON p.instance_id = s.instance_id
    WHERE s.run_id = run AND s.name IN ('rl.turn', 'rl.rollout')
),
bounds AS (
    SELECT instance_id, min(start_ns) AS lo, max(end_ns) AS hi FROM work GROUP BY instance_id
),
windows AS (
    SELECT step, start_ns, window_end_ns, lead(start_ns) OVER (ORDER BY start_ns) AS next_start_ns
    FROM _step_windows(run)
),
marks AS (  -- where each window starts (its step), and where one ends without the next starting (-1: none)
    SELECT start_ns AS t, step AS mark FROM windows
    UNION ALL
    SELECT window_end_ns, -1 FROM windows WHERE next_start_ns IS NULL OR next_start_ns <> window_end_ns
),
events AS (  -- +1/-1 per turn (dg), rollout (df) and weight sync (ds); ties need no grouping: between
             -- events at one instant a piece lasts 0 ns, and the last of them holds the running state
    SELECT instance_id, start_ns AS t, CASE WHEN name = 'rl.turn' THEN 1 ELSE 0 END AS dg,
           CASE WHEN name = 'rl.rollout' THEN 1 ELSE 0 END AS df, 0 AS ds, NULL::BIGINT AS mark
    FROM work
    UNION ALL
    SELECT instance_id, end_ns, CASE WHEN name = 'rl.turn' THEN -1 ELSE 0 END,
           CASE WHEN name = 'rl.rollout' THEN -1 ELSE 0 END, 0, NULL
    FROM work
    UNION ALL
    SELECT b.instance_id, sy.t, 0, 0, sy.ds, NULL
    FROM bounds AS b,
         (SELECT start_ns AS t, 1 AS ds FROM raw_spans WHERE run_id = run AND name = 'rl.weight_sync'
          UNION ALL
          SELECT end_ns, -1 FROM raw_spans WHERE run_id = run AND name = 'rl.weight_sync') AS sy
    UNION ALL
    SELECT b.instance_id, m.t, 0, 0, 0, m.mark FROM bounds AS b, marks AS m
),
placed AS (
    SELECT
        e.instance_id, e.t,
        lead(e.t) OVER (PARTITION BY e.instance_id ORDER BY e.t) - e.t AS ns,
        sum(e.dg) OVER running AS gen, sum(e.df) OVER running AS fly, sum(e.ds) OVER running AS sync,
        nullif(last_value(e.mark IGNORE NULLS) OVER running, -1) AS step,
        b.lo, b.hi
    FROM events AS e
    JOIN bounds AS b USING (instance_id)
    WINDOW running AS (PARTITION BY e.instance_id ORDER BY e.t ROWS UNBOUNDED PRECEDING)
    QUALIFY ns > 0 AND e.t >= b.lo AND e.t < b.hi
)
SELECT
    pl.step, pl.instance_id, any_value(p.devices) AS devices,
    sum(pl.ns) FILTER (pl.gen > 0) / 1e9 AS generating_s,
    sum(pl.ns) FILTER (pl.gen <= 0 AND pl.sync > 0) / 1e9 AS weights_wait_s,
    sum(pl.ns) FILTER (pl.gen <= 0 AND pl.sync <= 0 AND pl.fly > 0) / 1e9 AS tools_wait_s,
    sum(pl.ns) FILTER (pl.gen <= 0 AND pl.sync <= 0 AND pl.fly <= 0) / 1e9 AS idle_s
FROM placed AS pl
JOIN procs AS p USING (instance_id)
GROUP BY pl.step, pl.instance_id;

-- _device_turn_sums_src(run): each rollout process's turn time (Σ of rl.turn durations there, in nanoseconds) per
-- consuming step and environment of the rollouts it ran, and the part of it that went to rollouts that ended in
-- infra_error, aborted, or were otherwise not usable (no score, no signal, stale, or not consumed yet: step
-- NULL); NULL where no rollout was so. staged = false: turns of rollouts with no rl.rollout span yet (in
-- flight), step and environment NULL; they count in the process's total only. A rollout's device-seconds are
-- its share of its process's turn time times the process's generating device-seconds (_wasted_sums_src):
-- concurrent turns share the devices. Kept per step, not per rollout, so that share, taken over the whole run,
-- is summed from a few rows per step.
CREATE OR REPLACE MACRO _device_turn_sums_src(run) AS TABLE
WITH per_rollout AS (
    SELECT rollout_id, instance_id, sum(end_ns - start_ns) AS turn_ns
    FROM raw_spans
    WHERE run_id = run AND name = 'rl.turn' AND rollout_id IS NOT NULL
    GROUP BY rollout_id, instance_id
)
SELECT
    st.step, st.environment, d.instance_id, st.rollout_id IS NOT NULL AS staged,
    CAST(sum(d.turn_ns) AS BIGINT) AS turn_ns,
    CAST(sum(d.turn_ns) FILTER (st.rollout_status = 'infra_error') AS BIGINT) AS infra_error_ns,
    CAST(sum(d.turn_ns) FILTER (st.rollout_status = 'aborted') AS BIGINT) AS aborted_ns,
    CAST(sum(d.turn_ns) FILTER (st.rollout_status NOT IN ('infra_error', 'aborted') AND NOT st.usable) AS BIGINT)
        AS unused_ns
FROM per_rollout AS d
LEFT JOIN rollout_stages(run) AS st USING (rollout_id)
GROUP BY ALL;

-- The names the analyses read; a reader points them at the store's derived tables (queries/tables.py).
CREATE OR REPLACE MACRO _process_activity(run) AS TABLE SELECT * FROM _process_activity_src(run);
CREATE OR REPLACE MACRO _open_rollouts(run) AS TABLE SELECT * FROM _open_rollouts_src(run);
CREATE OR REPLACE MACRO _scoring(run) AS TABLE SELECT * FROM _scoring_src(run);

-- _run_percentiles_src(run): the exact percentiles of the whole run (all_environments) and of each environment,
-- taken once per catch-up over every value of _rollout_tails, _turn_latency and _scoring (above):
-- what throughput.sql, disaggregation.sql and scoring_latency.sql read when no step range is chosen (scope
-- "run": every step's values go into them). A step range takes them from the narrow per-value tables instead.
-- verifier_s and judge_s: scoring calls' latency p50 and p99 by kind (scoring_latency.sql's), NULL without calls.
CREATE OR REPLACE MACRO _run_percentiles_src(run) AS TABLE
WITH tails AS (
    SELECT
        GROUPING(environment) = 1 AS all_environments, environment,
        quantile_cont(generated, [0.5, 0.9, 0.99]) AS tokens,
        quantile_cont(duration_s, [0.5, 0.9, 0.99]) AS seconds,
        sum(duration_s) AS total_s
    FROM _rollout_tails(run)
    GROUP BY GROUPING SETS ((), (environment))
),
latency AS (
    SELECT
        GROUPING(environment) = 1 AS all_environments, environment,
        median(duration_s) AS turn_latency_p50_s
    FROM _turn_latency(run)
    GROUP BY GROUPING SETS ((), (environment))
),
scoring AS (
    SELECT
        GROUPING(environment) = 1 AS all_environments, environment,
        quantile_cont(duration_s, [0.5, 0.99]) FILTER (kind = 'verifier') AS verifier_s,
        quantile_cont(duration_s, [0.5, 0.99]) FILTER (kind = 'judge') AS judge_s
    FROM _scoring(run)
    GROUP BY GROUPING SETS ((), (environment))
),
groups AS (  -- every environment with values of any of the three (and the whole run, which always has a row)
    SELECT all_environments, environment FROM tails
    UNION
    SELECT all_environments, environment FROM latency
    UNION
    SELECT all_environments, environment FROM scoring
)
SELECT
    g.all_environments, g.environment, t.tokens, t.seconds, t.total_s, l.turn_latency_p50_s, s.verifier_s,
    s.judge_s
FROM groups AS g
LEFT JOIN tails AS t
    ON t.all_environments = g.all_environments AND t.environment IS NOT DISTINCT FROM g.environment
LEFT JOIN latency AS l
    ON l.all_environments = g.all_environments AND l.environment IS NOT DISTINCT FROM g.environment
LEFT JOIN scoring AS s
    ON s.all_environments = g.all_environments AND s.environment IS NOT DISTINCT FROM g.environment;
CREATE OR REPLACE MACRO _run_percentiles(run) AS TABLE SELECT * FROM _run_percentiles_src(run);
CREATE OR REPLACE MACRO _trainer_goodput(run) AS TABLE SELECT * FROM _trainer_goodput_src(run);
CREATE OR REPLACE MACRO _rollout_goodput(run) AS TABLE SELECT * FROM _rollout_goodput_src(run);
CREATE OR REPLACE MACRO _device_turn_sums(run) AS TABLE SELECT * FROM _device_turn_sums_src(run);

-- _wasted_sums_src(run): generating device-seconds per consuming step and environment on rollouts never used
-- (docs/metrics.md, "Goodput"): a rollout's device-seconds are its share of its rollout process's turn seconds
-- times that process's generating device-seconds over the run (concurrent turns share the devices), summed
-- here per step, environment and process (_device_turn_sums) rather than per rollout: the same sum.
-- infra_error and aborted count rollouts that ended so; unused the others not usable (no score, no signal,
-- stale, or not yet consumed: step NULL); total_device_s is every rollout's. A few rows per step, so
-- wasted_devices.sql reads no per-rollout table, and neither does a catch-up that takes it again.
-- (After the names above: it reads _rollout_goodput and _device_turn_sums.)
CREATE OR REPLACE MACRO _wasted_sums_src(run) AS TABLE
WITH procs AS (
    SELECT instance_id, sum(coalesce(generating_s, 0) * devices) AS generating_device_s
    FROM _rollout_goodput(run)
    GROUP BY instance_id
),
turns AS (
    SELECT *, sum(turn_ns) OVER (PARTITION BY instance_id) AS process_turn_ns FROM _device_turn_sums(run)
),
shared AS (  -- device-seconds per turn nanosecond on each process
    SELECT t.*, p.generating_device_s / nullif(t.process_turn_ns, 0) AS per_ns
    FROM turns AS t
    JOIN procs AS p USING (instance_id)
    WHERE t.staged
)
SELECT
    step,
    environment,
    sum(infra_error_ns * per_ns) AS infra_error_device_s,  -- NULL where no rollout ended so, as before
    sum(aborted_ns * per_ns) AS aborted_device_s,
    sum(unused_ns * per_ns) AS unused_device_s,
    sum(turn_ns * per_ns) AS total_device_s
FROM shared
GROUP BY step, environment;

CREATE OR REPLACE MACRO _wasted_sums(run) AS TABLE SELECT * FROM _wasted_sums_src(run);
