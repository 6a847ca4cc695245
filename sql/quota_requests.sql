-- quota_requests: one quota request per row, in its state now, from the steps of quota_events taken by now:
-- rejected (a reject), expired (valid_until passed, approved or not), active (approved and valid_from reached),
-- approved (in force from a later time), else pending. `gpuledger quota list` prints the same rows
-- (gpuledger/quota_requests.py request_states, the same rule; tests/core/test_quota_requests.py holds them together).
-- A request has one decision (its file is created if absent: of two racing approvers one wins); were there two, the
-- first taken counts. Times are UTC.
CREATE OR REPLACE VIEW quota_requests AS
WITH steps AS (SELECT * FROM quota_events WHERE ts <= now()),
asked AS (SELECT * FROM steps WHERE action = 'request' QUALIFY row_number() OVER (PARTITION BY request_id) = 1),
decided AS (
    SELECT request_id, action AS decision, actor AS decided_by, ts AS decided_at, reason AS note
    FROM steps
    WHERE action <> 'request'
    QUALIFY row_number() OVER (PARTITION BY request_id ORDER BY ts, event_id) = 1
)
SELECT
    a.request_id,                                            -- VARCHAR: the request's id (q-YYYYMMDD-xxxxxxxx)
    CASE
        WHEN d.decision = 'reject' THEN 'rejected'
        WHEN now() >= a.valid_until THEN 'expired'
        WHEN d.decision = 'approve' AND now() >= a.valid_from THEN 'active'
        WHEN d.decision = 'approve' THEN 'approved'
        ELSE 'pending'
    END AS state,                                            -- VARCHAR: pending, approved, active, rejected, expired
    a.cluster,                                               -- VARCHAR: cluster whose webhook applies it
    a.tenant,                                                -- VARCHAR: the tenant whose quota it raises
    a.gpu_model,                                             -- VARCHAR: GPU model, named as a quota key names it
    a.gpus,                                                  -- DOUBLE: GPUs added to that quota while active
    a.valid_from,                                            -- TIMESTAMP WITH TIME ZONE: in force from
    a.valid_until,                                           -- TIMESTAMP WITH TIME ZONE: until (exclusive)
    a.actor AS requested_by,                                 -- VARCHAR: who asked
    a.ts AS requested_at,                                    -- TIMESTAMP WITH TIME ZONE: when
    a.reason,                                                -- VARCHAR: why
    d.decided_by,                                            -- VARCHAR: who approved or rejected it (null: nobody yet)
    d.decided_at,                                            -- TIMESTAMP WITH TIME ZONE: when
    d.note                                                   -- VARCHAR: the decider's note
FROM asked a
LEFT JOIN decided d ON d.request_id = a.request_id
ORDER BY a.requested_at, a.request_id;
