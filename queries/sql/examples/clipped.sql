-- Example rollouts from their transcripts (docs/transcripts.md, "Examples"): rollouts with a message that
-- ended with finish reason $finish_reason ('length': a generation cut at the token limit, a clipped rollout),
-- the most such messages first. examples/ranked.sql filters and picks the examples.
WITH ended AS (
    SELECT rollout_id, count(*) AS messages
    FROM messages
    WHERE run_id = $run_id AND finish_reason = $finish_reason AND rollout_id IS NOT NULL
    GROUP BY rollout_id
)
SELECT rollout_id, messages AS value FROM ended
