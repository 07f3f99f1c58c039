-- The live messages segments the raw_messages view reads (@files, filled by the reader): what
-- a text search looks up in the trigram sidecars (queries/text_index.py).
CREATE OR REPLACE VIEW _message_segments AS
SELECT unnest(@files::VARCHAR[]) AS path;
