-- 0004_request_events_mover.sql - which mover moved a tunnel's bytes.
--
-- request_events.mover is "copy" (edged's userspace copy), "sockmap"
-- (the kernel's sockmap splice moved all of them) or "copy+sockmap"
-- (part of each: splice = "auto" handing a tunnel back and forth, or a
-- hand-back to the copy mover); NULL for a request (docs/analytics.md).
ALTER TABLE request_events ADD COLUMN mover text;
