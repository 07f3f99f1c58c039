-- Transcript flags (docs/metrics.md, "Transcript flags"): what a rollout's messages show went wrong, per rollout
-- (_rollout_flags_src, from the run's messages dataset and its tool spans) and per consuming step and environment
-- (_flag_sums_src, what transcript_flags.sql and the Learning page read). Each _<name>_src(run) is the definition;
-- _<name>(run) is what the analyses read (a reader points it at the store's derived table, queries/tables.py), so a
-- page never reads message text.

-- _loops(text): a text that ends in a loop: its last 32 characters occur at least 4 times in its last 1,000 (a
-- model repeating one passage until it stopped, or was cut off: any loop whose passage is at most 250 characters).
-- Counted in bytes: replace() removes non-overlapping occurrences.
CREATE OR REPLACE MACRO _loops(text) AS coalesce(
    strlen(text) >= 128
    AND strlen(right(text, 1000)) - strlen(replace(right(text, 1000), right(text, 32), ''))
        >= 4 * strlen(right(text, 32)),
    false
);

-- _answer_given(text): a final reply a verifier can read an answer from: \boxed{...}, an <answer> tag, a fenced
-- block (a patch, code) or a line starting "Answer:" / "Final answer:" (any case).
CREATE OR REPLACE MACRO _answer_given(text) AS
    coalesce(regexp_matches(text, '(?im)\\boxed\{|<answer>|```|^\s*(final\s+)?answer\s*:'), false);

-- _tool_failed(text): a tool result that says the tool itself failed (not the code it ran: a failing test is
-- not a tool error): a Python traceback, a line starting "SomethingError: " or "Error: ", or a shell's
-- "command not found" / "No such file or directory".
CREATE OR REPLACE MACRO _tool_failed(text) AS coalesce(
    regexp_matches(
        text,
        '(?m)^(Traceback \(most recent call last\)|[A-Za-z.]*(Error|Exception): )|: (command not found|No such file or directory)$'
    ),
    false
);

-- _rollout_flags_src(run): per rollout with replies in the messages dataset: its replies (assistant outputs of
-- anything but a judge, verifier or teacher), those cut at the token limit (finish_reason 'length'), those ending
-- in a loop (content or reasoning), whether it completed without a readable answer (its rl.rollout span ended ok
-- and its last reply is empty or holds none), and its tool calls (execute_tool spans) and how many failed: the
-- span records an error, or its result says the tool failed.
CREATE OR REPLACE MACRO _rollout_flags_src(run) AS TABLE
WITH said AS (
    SELECT rollout_id, trace_id, span_id, start_ns, ordinal, source, role, span_name, content, reasoning,
        finish_reason
    FROM raw_messages
    WHERE run_id = run AND rollout_id IS NOT NULL
),
replies AS (
    SELECT
        rollout_id,
        count(*) AS replies,
        count(*) FILTER (finish_reason = 'length') AS truncated_replies,
        count(*) FILTER (_loops(content) OR _loops(reasoning)) AS looping_replies,
        -- read per reply, so that no text is held per rollout (at 10M spans that spilled gigabytes)
        arg_max_null(_answer_given(content), (start_ns, span_id, ordinal)) AS answered
    FROM said
    WHERE source = 'output' AND role = 'assistant' AND span_name NOT IN ('rl.judge', 'rl.reward', 'rl.teacher')
    GROUP BY rollout_id
),
calls AS (
    SELECT
        t.rollout_id,
        count(*) AS tool_calls,
        count(*) FILTER (t.status_code = 'error' OR t.error_type IS NOT NULL OR r.failed) AS tool_errors
    FROM tools AS t
    LEFT JOIN (SELECT trace_id, span_id, _tool_failed(content) AS failed FROM said WHERE source = 'tool_result') AS r
        ON r.span_id = t.span_id AND lower(hex(r.trace_id)) = t.trace_id
    WHERE t.run_id = run AND t.rollout_id IN (SELECT rollout_id FROM replies)
    GROUP BY t.rollout_id
)
SELECT
    p.rollout_id, p.replies, p.truncated_replies, p.looping_replies,
    coalesce(o.rollout_status = 'ok' AND NOT coalesce(p.answered, false), false) AS answer_missing,
    coalesce(c.tool_calls, 0) AS tool_calls, coalesce(c.tool_errors, 0) AS tool_errors
FROM replies AS p
LEFT JOIN calls AS c USING (rollout_id)
LEFT JOIN (SELECT rollout_id, any_value(rollout_status) AS rollout_status FROM rollouts WHERE run_id = run GROUP BY ALL)
    AS o USING (rollout_id);
CREATE OR REPLACE MACRO _rollout_flags(run) AS TABLE SELECT * FROM _rollout_flags_src(run);

-- _flag_sums_src(run): per consuming step (NULL: not consumed yet) and environment, the rollouts with replies and
-- how many carry each flag, and their failed tool calls (transcript_flags.sql).
CREATE OR REPLACE MACRO _flag_sums_src(run) AS TABLE
SELECT
    c.step, c.environment,
    count(*) AS rollouts,
    count(*) FILTER (f.truncated_replies > 0) AS truncated,
    count(*) FILTER (f.answer_missing) AS answer_missing,
    count(*) FILTER (f.looping_replies > 0) AS looping,
    count(*) FILTER (f.tool_errors > 0) AS tool_error_rollouts,
    sum(f.tool_errors)::BIGINT AS tool_errors
FROM _rollout_flags(run) AS f
JOIN rollout_steps(run) AS c USING (rollout_id)
GROUP BY ALL;
CREATE OR REPLACE MACRO _flag_sums(run) AS TABLE SELECT * FROM _flag_sums_src(run);
