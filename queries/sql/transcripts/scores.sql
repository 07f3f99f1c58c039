-- Each reward function's score for one rollout (docs/transcripts.md): its verifier spans (rl.reward: name,
-- score, status) and model judges (rl.judge: the judge model, its score and status), in start order, with how
-- long each took. Read in the rollout's time window ($lo .. $hi, window.sql).
SELECT
    CASE WHEN name = 'rl.judge' THEN 'judge' ELSE 'reward' END AS kind,
    coalesce(reward_name, request_model, CASE WHEN name = 'rl.judge' THEN 'judge' ELSE 'reward' END) AS name,
    reward,
    coalesce(judge_status, CASE WHEN status_code = 'error' THEN 'error' ELSE 'ok' END) AS status,
    duration_s
FROM spans
WHERE run_id = $run_id AND rollout_id = $rollout_id AND name IN ('rl.reward', 'rl.judge')
  AND start_ns BETWEEN $lo AND $hi
ORDER BY start_ns, span_id
