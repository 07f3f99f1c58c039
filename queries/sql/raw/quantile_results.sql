-- run_percentiles' rows and the new windows after an incremental catch-up, from the percentiles
-- refresh_quantiles.sql read from their windows (_qw_answers, each value filled in), and whether every one
-- was there ("kept"; if not, queries/refresh.py takes them again over every value).
CREATE OR REPLACE TEMP TABLE _merged AS  -- run_percentiles' rows, as _run_percentiles_src gives them
WITH g AS (
    SELECT
        all_environments, environment,
        max(rows) FILTER (metric = 'tokens') AS tail_rows,
        max(rows) FILTER (metric = 'latency') AS latency_rows,
        max(rows) FILTER (metric = 'verifier_s') AS verifier_rows,
        max(rows) FILTER (metric = 'judge_s') AS judge_rows,
        max(n) FILTER (metric = 'tokens') AS tokens_n, max(n) FILTER (metric = 'seconds') AS seconds_n,
        max(n) FILTER (metric = 'latency') AS latency_n,
        max(n) FILTER (metric = 'verifier_s') AS verifier_n, max(n) FILTER (metric = 'judge_s') AS judge_n,
        list(value ORDER BY slot) FILTER (metric = 'tokens') AS tokens,
        list(value ORDER BY slot) FILTER (metric = 'seconds') AS seconds,
        any_value(total) FILTER (metric = 'seconds') AS total_s,
        any_value(value) FILTER (metric = 'latency') AS turn_latency_p50_s,
        list(value ORDER BY slot) FILTER (metric = 'verifier_s') AS verifier_s,
        list(value ORDER BY slot) FILTER (metric = 'judge_s') AS judge_s
    FROM _qw_answers
    GROUP BY all_environments, environment
)
SELECT
    $run AS run_id, all_environments, environment,
    CASE WHEN tokens_n > 0 THEN tokens END AS tokens,
    CASE WHEN seconds_n > 0 THEN seconds END AS seconds,
    CASE WHEN seconds_n > 0 THEN total_s END AS total_s,
    CASE WHEN latency_n > 0 THEN turn_latency_p50_s END AS turn_latency_p50_s,
    CASE WHEN verifier_n > 0 THEN verifier_s END AS verifier_s,
    CASE WHEN judge_n > 0 THEN judge_s END AS judge_s
FROM g
WHERE all_environments OR coalesce(tail_rows, 0) > 0 OR coalesce(latency_rows, 0) > 0
   OR coalesce(verifier_rows, 0) > 0 OR coalesce(judge_rows, 0) > 0;
-- The new windows: trimmed to $k values on each side of the ranks they answered (the values beyond move into
-- below, or out above), so a window keeps its size however long the run stays inside it.
CREATE OR REPLACE TABLE _quantile_windows_mat AS
WITH placed AS (
    SELECT
        k.*,
        k.first + k.c <= a.j0 - $k AS under,  -- every copy lies more than $k positions below the lower rank
        k.first > a.j1 + $k AS over
    FROM _qw_ranked AS k
    JOIN _qw_answers AS a
        ON a.all_environments = k.all_environments AND a.environment IS NOT DISTINCT FROM k.environment
       AND a.metric = k.metric AND a.slot = k.slot
)
SELECT
    a.all_environments, a.environment, a.metric, a.slot, a.q, a.rows::BIGINT AS rows, a.n::BIGINT AS n,
    CASE WHEN a.n > 0 THEN a.total END AS total,
    coalesce(max(p.v) FILTER (p.under), a.lo) AS lo,
    coalesce(min(p.v) FILTER (p.over), a.hi) AS hi,
    (a.below + coalesce(sum(p.c) FILTER (p.under), 0))::BIGINT AS below,
    coalesce(list(p.v ORDER BY p.v) FILTER (NOT p.under AND NOT p.over), []) AS window_values,
    coalesce(list(p.c::BIGINT ORDER BY p.v) FILTER (NOT p.under AND NOT p.over), []) AS window_counts
FROM _qw_answers AS a
LEFT JOIN placed AS p
    ON p.all_environments = a.all_environments AND p.environment IS NOT DISTINCT FROM a.environment
   AND p.metric = a.metric AND p.slot = a.slot
GROUP BY a.all_environments, a.environment, a.metric, a.slot, a.q, a.rows, a.n, a.total, a.lo, a.hi, a.below;
SELECT
    coalesce(bool_and(covered), true) AND NOT EXISTS (SELECT 1 FROM _qw_inside WHERE c < 0) AS kept
FROM _qw_answers;
