-- The rollout fleet's goodput over the selection (docs/metrics.md, "Goodput"; the Health page's headline): each
-- of rollout_goodput.sql's device-seconds (read as `analysis`, in the same statement) summed over its steps
-- (time outside every step's window too), named rollout_<column> (0 without any), and
-- rollout_generating_share = Σ generating / Σ of all four states.
SELECT
    coalesce(sum(COLUMNS(* EXCLUDE (step, generating_share))), 0) AS 'rollout_\0',
    sum(generating_device_s)
        / nullif(
            sum(generating_device_s) + sum(weights_wait_device_s) + sum(tools_wait_device_s) + sum(idle_device_s),
            0
        ) AS rollout_generating_share
FROM analysis
