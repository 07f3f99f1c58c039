-- One answer's value: quantile_cont of its two values at $fraction of the way, the run's own (h of n values),
-- last bit included: DuckDB's interpolation, not an expression of ours that may round differently.
UPDATE _qw_answers
SET value = (SELECT quantile_cont(x, $fraction::DOUBLE) FROM (VALUES ($v0::DOUBLE), ($v1::DOUBLE)) AS t(x))
WHERE all_environments = $all_environments
  AND environment IS NOT DISTINCT FROM $environment
  AND metric = $metric
  AND slot = $slot;
