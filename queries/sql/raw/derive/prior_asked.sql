-- The wanted rollouts are asked for now: a later pass does not read their steps again.
INSERT INTO _prior_asked SELECT rollout_id FROM _prior_wanted;
