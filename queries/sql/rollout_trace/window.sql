-- Where one rollout's spans can be, in time, so the waterfall reads the raw spans of a few row groups and not
-- the run (segments are not ordered by rollout id; they are by time, and row groups keep start_ns ranges).
-- lo .. hi: its own spans (turns, tools, rewards, judges, teachers, an engine's requests in its trace) start
-- inside its rl.rollout span; a minute each side ($skew_ns: trace.SKEW_NS) absorbs clock skew between the hosts
-- that wrote them.
-- sample_lo .. sample_hi: its rl.sample spans and the train steps that consumed it, which start inside the
-- train steps from the first that consumed it (rollout_steps) through $reuse_steps more (a batch trained on in
-- several optimizer steps: TRL's num_iterations, PPO epochs). NULL when no train step has consumed it.
WITH r AS (
    SELECT start_ns, end_ns FROM rollouts WHERE run_id = $run_id AND rollout_id = $rollout_id LIMIT 1
),
first AS (
    SELECT min(step) AS step FROM rollout_steps($run_id) WHERE rollout_id = $rollout_id
),
steps AS (
    SELECT min(t.start_ns) AS lo, max(t.end_ns) AS hi
    FROM train_steps AS t, first AS f
    WHERE t.run_id = $run_id AND t.train_step BETWEEN f.step AND f.step + $reuse_steps
)
SELECT
    r.start_ns - $skew_ns AS lo,
    r.end_ns + $skew_ns AS hi,
    least(steps.lo, r.start_ns) - $skew_ns AS sample_lo,
    steps.hi + $skew_ns AS sample_hi
FROM r, steps
