-- multi_acquire: take several reentrant locks all-or-nothing, in one call
-- (the members of a multi-lock that share one cluster slot).
--
-- Runs after count.lua (lua.go prefixes it): counts as acquire.lua does,
-- per member: the client sends the owner's hold count of each member before
-- the request, so a resent copy is told from a new request without a latch
-- per request. The request is a resend only if every member says so.
--
-- KEYS     KEYS[1..n] the members' lock hashes; KEYS[n+1] the request
--          marker of this attempt on the first member (see acquire.lua)
-- ARGV[1]  lease in milliseconds (a re-entry or resend never shortens a TTL)
-- ARGV[2]  owner token
-- ARGV[3]  marker lifetime in milliseconds
-- ARGV[3+i] the owner's hold count of member i before this request
-- ARGV[3+n+i] member i's lease in milliseconds (absent: ARGV[1]): a
--          re-entry keeps what the owner's holds of that member count on,
--          not another member's longer lease
--
-- Returns an array {i, ttl}
--   {0, 0}     every member is now held by ARGV[2] (taken or re-entered,
--              or taken by an earlier copy of this very request)
--   {i, ttl}   nothing taken: member i is held by someone else for ttl ms
--              more (-1: no expiry); the caller waits on member i
--   {0, -3}    nothing taken: the request was settled as aborted, or it is
--              a late copy of a request whose holds have changed since
--   {i, -6}    nothing taken: the owner's hold count of member i in Redis
--              is not the one sent (the hold a re-entry counts on is gone)
local n = #KEYS - 1
local marker = KEYS[n + 1]
local function leaseOf(i)
    return tonumber(ARGV[3 + n + i] or ARGV[1])
end
-- Classify every member before writing anything: all or nothing.
local verdict, value = {}, {}
local resent = true
for i = 1, n do
    verdict[i], value[i] = lockgen_classify(KEYS[i], ARGV[2], tonumber(ARGV[3 + i]), marker)
    if verdict[i] ~= 'resend' then
        resent = false
    end
end
if resent then
    -- An earlier copy of this request took every member: count it once.
    for i = 1, n do
        lockgen_resent(KEYS[i], marker, ARGV[3], leaseOf(i), nil, value[i])
    end
    return {0, 0}
end
for i = 1, n do
    local v = verdict[i]
    if v == -3 then
        return {0, -3}
    end
    if v == -6 or v == 'resend' then
        -- A member the request took while another it did not: the counts
        -- moved under the owner.
        return {i, -6}
    end
end
for i = 1, n do
    if verdict[i] == 'new' and value[i] ~= -2 then
        local ttl = value[i]
        if ttl == 0 then
            ttl = 1
        end
        return {i, ttl}
    end
end
for i = 1, n do
    lockgen_reenter(KEYS[i], ARGV[2], leaseOf(i), nil)
end
return {0, 0}
