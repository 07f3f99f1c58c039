-- The trainer's goodput over the selection (docs/metrics.md, "Goodput"; the Health page's headline): each of
-- trainer_goodput.sql's seconds (read as `analysis`, in the same statement) summed over its steps, named
-- trainer_<column> (0 without steps), and trainer_computing_share = Σ computing_s / Σ window_s.
SELECT
    coalesce(sum(COLUMNS(* EXCLUDE (step, computing_share))), 0) AS 'trainer_\0',
    sum(computing_s) / nullif(sum(window_s), 0) AS trainer_computing_share
FROM analysis
