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
