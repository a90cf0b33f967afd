-- index.lua: the index of the keys armed lately, so that a process whose
-- pub/sub message was lost (it was reconnecting, or joined later) still
-- hears of them within a poll (listen.go). One key, its own: Redis Cluster
-- runs it on the index's node, apart from the key's state (apply.lua).
--
-- KEYS[1]  the index: a sorted set, each armed key scored by when, in µs
--          of Redis's clock.
-- ARGV[1]  the key armed (its Redis key, as apply.lua's KEYS[1]).
-- ARGV[2]  how long a key stays in the index, in ms.
-- ARGV[3]  how many keys the index holds at most (the newest).
-- Returns the score given, as a decimal string (exact: a Lua number
-- returned as such would be cut to an integer, and a double's 17 digits
-- are not all a reply's).

-- TIME before a write (see apply.lua).
if redis.replicate_commands then redis.replicate_commands() end

local t = redis.call('TIME')                        -- {seconds, microseconds}
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local keep = tonumber(ARGV[2]) * 1000               -- the window, in µs
local score = string.format('%d', now)

-- Junk at the index (another type) is dropped: the index is only a hint.
local ok = redis.pcall('ZADD', KEYS[1], score, ARGV[1])
if type(ok) == 'table' and ok['err'] then           -- WRONGTYPE: not a sorted set
  redis.call('DEL', KEYS[1])
  redis.call('ZADD', KEYS[1], score, ARGV[1])
end
-- Forget the keys armed before the window, and all but the newest ARGV[3].
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('(%d', now - keep))
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, string.format('%d', -tonumber(ARGV[3]) - 1))
-- A TTL: twice the window, so an index nobody arms goes.
redis.call('PEXPIRE', KEYS[1], string.format('%d', 2 * tonumber(ARGV[2])))
return score
