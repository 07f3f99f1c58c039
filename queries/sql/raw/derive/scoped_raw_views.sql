-- raw_spans and raw_messages pointed at the spans and messages a scope or a piece read (scope_spans.sql,
-- scope_messages.sql), so that derive_full.sql derives them alone.
CREATE OR REPLACE VIEW raw_spans AS SELECT * FROM _scoped;
CREATE OR REPLACE VIEW raw_messages AS SELECT * FROM _scoped_messages;
