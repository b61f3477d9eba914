-- 0020_request_challenge.sql - what the proof-of-work challenge made of
-- a request (docs/gates.md; issue 34), in its analytics row.
--
-- request_events.challenge  'issued' (challenged: a page or a 403),
--     'solved' (a solution exchanged for a pass), 'passed' (admitted by a
--     pass or its prefix), 'failed' (a bad solution or pass: challenged
--     again); NULL: no challenge on its environment.
ALTER TABLE request_events ADD COLUMN challenge text;
