-- One task's attempts across training (docs/transcripts.md): every rollout of $task_id, oldest first, with the
-- train step that consumed it, the policy version that generated it, its status, reward and where the funnel
-- lost it (NULL: usable), and its turns and decoded tokens: is the task learned, and since when. At most
-- $limit attempts, the newest.
WITH attempts AS (
    SELECT s.*, r.start_time, r.start_ns
    FROM rollout_stages($run_id) AS s
    JOIN rollouts AS r ON r.run_id = $run_id AND r.rollout_id = s.rollout_id
    WHERE s.task_id = $task_id AND r.task_id = $task_id
    ORDER BY r.start_ns DESC
    LIMIT $limit
)
SELECT
    a.rollout_id, a.group_id, a.step, a.policy_version, a.rollout_status, a.reward, a.usable,
    a.lost_at, _loss_reason(a.lost_reason, a.group_id) AS lost_reason, a.staleness,
    coalesce(w.turns, 0) AS turns, w.generated AS decoded_tokens, a.start_time
FROM attempts AS a
LEFT JOIN _rollout_work($run_id) AS w USING (rollout_id)
ORDER BY a.start_ns, a.rollout_id
