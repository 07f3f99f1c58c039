-- _shown(text, max_chars): a transcript's text as a page or terminal shows it at first (docs/transcripts.md):
-- whole up to max_chars, else its first three quarters of max_chars and its last quarter around a marker that
-- says how many characters are not shown, as the capture cap keeps head and tail (a test log's failures are at
-- its end). NULL max_chars: whole.
CREATE OR REPLACE MACRO _shown(text, max_chars) AS
    CASE
        WHEN max_chars IS NULL OR length(text) <= max_chars THEN text
        ELSE left(text, max_chars * 3 // 4)
            || format('{}…[{:,} of {:,} characters not shown]…{}', chr(10),
                      length(text) - max_chars * 3 // 4 - max_chars // 4, length(text), chr(10))
            || right(text, max_chars // 4)
    END;

-- _loss_reason(lost_reason, group_id): why a rollout was lost as funnel_losses.sql names it (rollout_stages'
-- 'group too small' told apart: no group_id, or no other scored attempt in its group), so the examples of a
-- Funnel page's loss are found by the reason it shows.
CREATE OR REPLACE MACRO _loss_reason(lost_reason, group_id) AS
    CASE
        WHEN lost_reason = 'group too small' AND group_id IS NULL THEN 'no group_id'
        WHEN lost_reason = 'group too small' THEN 'only scored attempt in its group'
        ELSE lost_reason
    END;

-- A text search over a run's messages (docs/transcripts.md), defined once here for the two ways it reads them:
-- transcripts/search.sql reads every message, the walk (queries/text_search.py: search_chosen.sql,
-- search_hits.sql, search_merge.sql) the newest row groups first, and both must answer alike.

-- _search_rollouts(run, ...): the rollouts a text search looks in, one row each: the Rollouts page's filters
-- (search.sql's header says each; a NULL one filters nothing), and a finish reason one of the rollout's
-- messages ended with.
CREATE OR REPLACE MACRO _search_rollouts(
    run, want_environment, want_status, want_text, want_step_lo, want_step_hi, want_reward_min,
    want_reward_max, want_lost_at, want_lost_reason, want_finish_reason
) AS TABLE
SELECT
    rollout_id, environment, task_id, step, rollout_status, reward, lost_at,
    _loss_reason(lost_reason, group_id) AS lost_reason
FROM rollout_stages(run)
WHERE (want_environment IS NULL OR environment = want_environment)
  AND (want_status IS NULL OR rollout_status = want_status)
  AND (want_text IS NULL OR rollout_id ILIKE '%' || want_text || '%' OR task_id ILIKE '%' || want_text || '%')
  AND (want_step_lo IS NULL OR step >= want_step_lo)
  AND (want_step_hi IS NULL OR step <= want_step_hi)
  AND (want_reward_min IS NULL OR reward >= want_reward_min)
  AND (want_reward_max IS NULL OR reward <= want_reward_max)
  AND (want_lost_at IS NULL OR coalesce(lost_at, 'usable') = want_lost_at)
  AND (want_lost_reason IS NULL OR _loss_reason(lost_reason, group_id) = want_lost_reason)
  AND (want_finish_reason IS NULL OR rollout_id IN (
        SELECT rollout_id FROM messages WHERE run_id = run AND finish_reason = want_finish_reason));

-- _search_match(t, pattern, is_regex, prefilter): whether a message's text t holds pattern (case-insensitive;
-- an RE2 regular expression with is_regex; a NULL pattern: every text). prefilter (RE2, case-sensitive:
-- queries/text_index.py `prefilter`) passes every text whose lower() can contain lower(pattern), so lower()
-- runs on those alone.
CREATE OR REPLACE MACRO _search_match(t, pattern, is_regex, prefilter) AS
    pattern IS NULL
    OR CASE
        WHEN is_regex THEN regexp_matches(t, '(?i)' || pattern)
        ELSE CASE WHEN regexp_matches(t, prefilter) THEN contains(lower(t), lower(pattern)) END
    END;

-- _search_hit_at(t, pattern, is_regex): where in t its first match starts (1 for a NULL pattern).
CREATE OR REPLACE MACRO _search_hit_at(t, pattern, is_regex) AS
    CASE
        WHEN pattern IS NULL THEN 1
        WHEN is_regex THEN nullif(strpos(t, regexp_extract(t, '(?i)' || pattern)), 0)
        ELSE nullif(strpos(lower(t), lower(pattern)), 0)
    END;

-- _search_snippet(t, hit_at): 200 characters of t from 60 before its match, on one line, '…' where cut.
CREATE OR REPLACE MACRO _search_snippet(t, hit_at) AS
    CASE WHEN hit_at > 60 THEN '…' ELSE '' END
        || replace(substr(t, greatest(1, hit_at - 60), 200), chr(10), ' ')
        || CASE WHEN length(t) > hit_at + 139 THEN '…' ELSE '' END;
