-- Tasks by curriculum status (docs/metrics.md, "Learning"): of the tasks task_solve_rates.sql lists (read as
-- `analysis`, in the same statement), how many were attempted, always solved (every scored attempt succeeded:
-- too easy, no signal), never solved (none did: too hard, no signal) and mixed.
SELECT
    count(*) AS tasks_attempted,
    count(*) FILTER (status = 'always solved') AS tasks_always_solved,
    count(*) FILTER (status = 'never solved') AS tasks_never_solved,
    count(*) FILTER (status = 'mixed') AS tasks_mixed
FROM analysis
