-- Example rollouts of a speculative-decoding selection (docs/transcripts.md, "Examples"), from their turns:
--   drafter_logprobs  rollouts with turns that recorded the drafter's log-probabilities (the log-prob lint's
--                     turns), the most such turns first
--   low_acceptance    rollouts whose turns drafted tokens, the lowest share of drafted tokens accepted first
--                     (acceptance drift, a stale drafter), of the latest $versions policy versions drafted with
-- examples/ranked.sql filters and picks the examples (low_acceptance: the lowest first).
WITH drafted AS (
    SELECT
        rollout_id, policy_version,
        count(*) FILTER (logprobs_source = 'drafter') AS drafter_turns,
        sum(spec_accepted_tokens) / nullif(sum(spec_draft_tokens), 0) AS acceptance
    FROM turns
    WHERE run_id = $run_id AND rollout_id IS NOT NULL
      AND (logprobs_source = 'drafter' OR spec_draft_tokens > 0)
    GROUP BY rollout_id, policy_version
),
latest AS (
    SELECT max(policy_version) - $versions AS from_version FROM drafted
)
SELECT d.rollout_id, CASE $kind WHEN 'drafter_logprobs' THEN d.drafter_turns ELSE d.acceptance END AS value
FROM drafted AS d
WHERE CASE $kind
    WHEN 'drafter_logprobs' THEN d.drafter_turns > 0
    WHEN 'low_acceptance' THEN d.acceptance IS NOT NULL
        AND d.policy_version > (SELECT from_version FROM latest)
END
