-- 0025_request_trace.sql - a request's W3C trace context (docs/http.md,
-- "Trace context"; issue 36), in its analytics row.
--
-- request_events.trace_id  32 lowercase hex: the client's traceparent's
--     trace id, or the one edge started; NULL for TCP routes and
--     requests without a whole head.
-- request_events.span_id   16 lowercase hex: edge's span, the parent-id
--     it sent upstream.
-- An index on trace_id finds a trace's requests.
ALTER TABLE request_events ADD COLUMN trace_id text, ADD COLUMN span_id text;
CREATE INDEX request_events_trace_id ON request_events (trace_id)
    WHERE trace_id IS NOT NULL;
