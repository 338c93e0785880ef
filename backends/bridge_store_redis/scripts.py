"""The Lua scripts: every multi-key change is one script, so it is atomic.

Scripts are loaded once at start and called by SHA (redis-py's ``AsyncScript`` reloads
one transparently if the server forgot it, e.g. after a restart). Each script touches
the keys of one substore only and is given all of them in ``KEYS`` (computed in
Python), which is what Redis Cluster requires; none reads a key name out of data.

Row tables (agents, runs) share one shape: ``KEYS[1]`` a hash of documents by row
field, ``KEYS[2]`` a hash of each row's index members packed with cmsgpack,
``KEYS[3..]`` one sorted set per index (score 0, members ordered by bytes), and last
(``KEYS[#KEYS]``) a hash of who created each row, kept and dropped with the row.
Index number ``n`` (1-based) is ``KEYS[n + 2]``. Ranges over an index name the row a
member belongs to by a recipe: ``field = before .. member:sub(skip + 1) .. after``.
Lua compares nothing but bytes for equality here: its ``<`` on strings follows the
server's locale, so ordering across ranges is left to Python.
"""

from __future__ import annotations

from redis.asyncio import Redis, RedisCluster

_DROP_ROW = """
local function drop_row(field, members)
  for n, member in ipairs(members) do
    redis.call('ZREM', KEYS[n + 2], member)
  end
  redis.call('HDEL', KEYS[1], field)
  redis.call('HDEL', KEYS[2], field)
  redis.call('HDEL', KEYS[#KEYS], field)
end
"""

#: ARGV: mode ('create' | 'update'), field, document, creator ('' for none, and
#: ignored by updates: a row keeps its creator), then one member per index.
#: Returns 1, or 0 when the row exists (create) or is missing (update).
PUT_ROW = """
local field = ARGV[2]
local packed = redis.call('HGET', KEYS[2], field)
if packed then
  if ARGV[1] == 'create' then return 0 end
  for n, member in ipairs(cmsgpack.unpack(packed)) do
    redis.call('ZREM', KEYS[n + 2], member)
  end
elseif ARGV[1] == 'update' then
  return 0
end
local members = {}
for i = 5, #ARGV do
  redis.call('ZADD', KEYS[i - 2], 0, ARGV[i])
  members[#members + 1] = ARGV[i]
end
redis.call('HSET', KEYS[1], field, ARGV[3])
redis.call('HSET', KEYS[2], field, cmsgpack.pack(members))
if ARGV[1] == 'create' and ARGV[4] ~= '' then
  redis.call('HSET', KEYS[#KEYS], field, ARGV[4])
end
return 1
"""

#: ARGV: index number to check (0: none), the prefix that index's member must have,
#: then the fields of the rows to delete. Returns how many rows were deleted.
REMOVE_ROWS = (
    _DROP_ROW
    + """
local check, wanted = tonumber(ARGV[1]), ARGV[2]
local removed = 0
for i = 3, #ARGV do
  local packed = redis.call('HGET', KEYS[2], ARGV[i])
  if packed then
    local members = cmsgpack.unpack(packed)
    if check == 0 or string.sub(members[check], 1, #wanted) == wanted then
      drop_row(ARGV[i], members)
      removed = removed + 1
    end
  end
end
return removed
"""
)

#: ARGV: index number, min, max (ZRANGE BYLEX bounds), skip, before, after, batch size.
#: Deletes up to a batch of rows whose member lies in the range; returns how many.
REMOVE_RANGE = (
    _DROP_ROW
    + """
local index, skip = tonumber(ARGV[1]), tonumber(ARGV[4])
local members =
  redis.call('ZRANGE', KEYS[index + 2], ARGV[2], ARGV[3], 'BYLEX', 'LIMIT', 0, ARGV[7])
for _, member in ipairs(members) do
  local field = ARGV[5] .. string.sub(member, skip + 1) .. ARGV[6]
  drop_row(field, cmsgpack.unpack(redis.call('HGET', KEYS[2], field)))
end
return #members
"""
)

#: KEYS[1]: an index; KEYS[2], if given: the documents hash, to fetch each row's
#: document. ARGV: '1' for descending order, the limit per range, then per range: min,
#: max, skip, before, after. Returns per range {fields, documents?}, read in one step
#: so a page never mixes index and document states.
READ_RANGES = """
local reverse, limit, fetch = ARGV[1] == '1', ARGV[2], #KEYS == 2
local result = {}
for r = 3, #ARGV, 5 do
  local members
  if reverse then
    members = redis.call('ZRANGE', KEYS[1], ARGV[r + 1], ARGV[r], 'BYLEX', 'REV', 'LIMIT', 0, limit)
  else
    members = redis.call('ZRANGE', KEYS[1], ARGV[r], ARGV[r + 1], 'BYLEX', 'LIMIT', 0, limit)
  end
  local skip, fields = tonumber(ARGV[r + 2]), {}
  for i, member in ipairs(members) do
    fields[i] = ARGV[r + 3] .. string.sub(member, skip + 1) .. ARGV[r + 4]
  end
  local rows = {fields}
  if fetch and #fields > 0 then
    rows[2] = redis.call('HMGET', KEYS[2], unpack(fields))
  end
  result[#result + 1] = rows
end
return result
"""

#: Checkpoint blobs are one string key each (a hash of every blob would grow into one
#: multi-gigabyte key). KEYS: the blob key, the by-blob and by-agent indexes.
#: ARGV: the blob, its two index members. Returns 0 if the blob exists, else 1.
CREATE_BLOB = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], 0, ARGV[2])
redis.call('ZADD', KEYS[3], 0, ARGV[3])
return 1
"""

#: KEYS: a blob key. ARGV: the largest blob to answer whole. Returns the blob if it is
#: no larger (nil if missing), else its length, to be read in pieces (blob_reads.py).
READ_BLOB = """
local size = redis.call('STRLEN', KEYS[1])
if size > tonumber(ARGV[1]) then return size end
return redis.call('GET', KEYS[1])
"""

#: KEYS: the by-blob and by-agent indexes, then the blob keys. ARGV: per blob key, its
#: two index members.
DELETE_BLOBS = """
for i = 3, #KEYS do
  redis.call('DEL', KEYS[i])
  redis.call('ZREM', KEYS[1], ARGV[2 * i - 5])
  redis.call('ZREM', KEYS[2], ARGV[2 * i - 4])
end
"""

#: Sets a log's expiry after a write: its TTL (and the registry's score), or none.
#: Without KEYS[3] (the cluster layout has no registry) only the log's own keys.
_KEEP_LOG = """
local function keep_log(run_arg, ttl_arg)
  local ttl, registry = tonumber(ttl_arg), #KEYS == 3
  if ttl > 0 then
    local now = redis.call('TIME')
    local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl)
    -- The registry entry lives as long as the log; entries of logs that have expired
    -- are pruned here, so the registry does not collect them.
    if registry then
      redis.call('ZADD', KEYS[3], now_ms + ttl, run_arg)
      redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. now_ms)
    end
  else
    -- A log may carry a TTL from a server configured with retention: drop it, since
    -- this server promises to keep the log.
    redis.call('PERSIST', KEYS[1])
    redis.call('PERSIST', KEYS[2])
    if registry then
      redis.call('ZADD', KEYS[3], 'inf', run_arg)
    end
  end
end
"""

#: KEYS: the run's log, its idempotency-key hash, the registry of runs with logs (not
#: in the cluster layout, where the registry would be in another slot).
#: ARGV: run id, event body (JSON without seq/offset), idempotency key ('' for none),
#: time to live in milliseconds ('0' for none).
#: Returns {seq} for a new event, or {seq, member} of the event stored under the key.
#: The seq is the log's size plus one: events are never removed one by one, only
#: whole logs, so seqs stay gapless.
APPEND_EVENT = (
    _KEEP_LOG
    + """
local key = ARGV[3]
if key ~= '' then
  local existing = redis.call('HGET', KEYS[2], key)
  if existing then
    local found = redis.call('ZRANGE', KEYS[1], existing, existing, 'BYSCORE')
    return {tonumber(existing), found[1]}
  end
end
local seq = redis.call('ZCARD', KEYS[1]) + 1
redis.call('ZADD', KEYS[1], seq, string.format('%016d', seq) .. ARGV[2])
if key ~= '' then
  redis.call('HSET', KEYS[2], key, seq)
end
keep_log(ARGV[1], ARGV[4])
return {seq}
"""
)

#: KEYS: as APPEND_EVENT. ARGV: run id, time to live in milliseconds ('0' for none),
#: then per event its seq, its member (as APPEND_EVENT stores it) and its idempotency
#: key ('' for none), in seq order. Events at seqs the log holds are skipped.
#: Returns {count} stored, {'gap', last seq} or {'key', idempotency key}, having then
#: stored nothing.
RESTORE_EVENTS = (
    _KEEP_LOG
    + """
local last = redis.call('ZCARD', KEYS[1])
local new = {}
for i = 3, #ARGV, 3 do
  local seq = tonumber(ARGV[i])
  if seq > last then
    if #new == 0 and seq ~= last + 1 then
      return {'gap', last}
    end
    local key = ARGV[i + 2]
    if key ~= '' and redis.call('HEXISTS', KEYS[2], key) == 1 then
      return {'key', key}
    end
    new[#new + 1] = i
  end
end
if #new == 0 then
  return {0}
end
for _, i in ipairs(new) do
  redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i + 1])
  if ARGV[i + 2] ~= '' then
    redis.call('HSET', KEYS[2], ARGV[i + 2], ARGV[i])
  end
end
keep_log(ARGV[1], ARGV[2])
return {#new}
"""
)

#: Cluster layout: a blob's bytes are in its agent's slot, so its index entries are
#: written apart from them. KEYS: the by-blob and by-agent indexes. ARGV: '1' to add,
#: '0' to remove, then per blob its two index members.
INDEX_BLOBS = """
local add = ARGV[1] == '1'
for i = 2, #ARGV, 2 do
  if add then
    redis.call('ZADD', KEYS[1], 0, ARGV[i])
    redis.call('ZADD', KEYS[2], 0, ARGV[i + 1])
  else
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('ZREM', KEYS[2], ARGV[i + 1])
  end
end
"""

#: KEYS[1]: the registry; then per run its log and idempotency-key hash.
#: ARGV: the run ids, in the same order.
DELETE_EVENT_LOGS = """
for i, run_id in ipairs(ARGV) do
  redis.call('DEL', KEYS[2 * i], KEYS[2 * i + 1])
  redis.call('ZREM', KEYS[1], run_id)
end
"""

ALL = (
    PUT_ROW,
    REMOVE_ROWS,
    REMOVE_RANGE,
    READ_RANGES,
    CREATE_BLOB,
    READ_BLOB,
    DELETE_BLOBS,
    INDEX_BLOBS,
    APPEND_EVENT,
    RESTORE_EVENTS,
    DELETE_EVENT_LOGS,
)


class Scripts:
    """The scripts registered on one client; callables that run them by SHA."""

    def __init__(self, client: Redis | RedisCluster) -> None:
        self._client = client
        self.put_row = client.register_script(PUT_ROW)
        self.remove_rows = client.register_script(REMOVE_ROWS)
        self.remove_range = client.register_script(REMOVE_RANGE)
        self.read_ranges = client.register_script(READ_RANGES)
        self.create_blob = client.register_script(CREATE_BLOB)
        self.read_blob = client.register_script(READ_BLOB)
        self.delete_blobs = client.register_script(DELETE_BLOBS)
        self.index_blobs = client.register_script(INDEX_BLOBS)
        self.append_event = client.register_script(APPEND_EVENT)
        self.restore_events = client.register_script(RESTORE_EVENTS)
        self.delete_event_logs = client.register_script(DELETE_EVENT_LOGS)

    async def load(self) -> None:
        """Load every script into the server's cache (once; they are then called by SHA)."""
        for source in ALL:
            await self._client.script_load(source)
