-- The rollouts a pass of scope.sql can add to the changed ones and not asked for yet (_prior_wanted): those it
-- reads in _idx and _stepped (filled before the pass), and those changed already. Answers how many.
CREATE OR REPLACE TEMP TABLE _prior_wanted AS
SELECT rollout_id FROM (
    SELECT rollout_id FROM _idx
    UNION ALL SELECT rollout_id FROM _stepped
    UNION ALL SELECT rollout_id FROM _scope_changed
)
WHERE rollout_id IS NOT NULL
EXCEPT SELECT rollout_id FROM _prior_asked;
SELECT count(*) AS wanted FROM _prior_wanted;
