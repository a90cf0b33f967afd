-- apply.lua: one Apply of a retryhttp.Store to one key, atomically, on
-- Redis's clock. It runs the steps of store.go's StoreState.apply and of
-- lanes.go's StoreLane (take, ready, holdTo, correct, untake, setRates)
-- line for line, and nothing of the policy: what to hold, at what rate to
-- pace, is decided in Go (policy.go) and arrives here as ops.
--
-- Units: Lua's numbers are doubles, so times are whole microseconds since
-- the Unix epoch (1.8e15 is exact; 0 is Go's zero Time, "never") and so
-- are the durations Shift, Pushed and Moved; Per and Burst, and a send's
-- charge, are nanoseconds as in Go (a token's Per can be far below one).
--
-- KEYS[1]  the key's state: a string holding the record (see encode).
-- ARGV[1]  the caller's process id: the message it publishes starts with it.
-- ARGV[2]  the channel to publish a hold or a limit on; "" publishes nothing.
-- ARGV[3]  how long to keep the key past its latest time, in ms (the TTL).
-- ARGV[4]  the ops, space-separated (see ops.go's appendOps):
--          T c0 c1 c2 c3 within_ns retry     StoreTake
--          H lane for_ns refuse              StoreHold
--          C lane for_ns mark_us moved_ns    StoreCorrect
--          U lane mark_us charge_ns          StoreUntake
--          R lane version per burst n:rates  StoreRates (n bytes, binary)
--          L lane                            StoreLimited
--          N                                 a kind unknown here: nothing
-- Returns "now wait took refused stale " .. the record: the key's state
-- after the ops and what its Take did, with Redis's now, in one reply.

-- TIME before a write: Redis 5+ replicates a script by its effects; on 3.2
-- and 4 this call makes it so, elsewhere it is a no-op.
if redis.replicate_commands then redis.replicate_commands() end

-- The largest duration in µs: Go's durNs saturates at time.Duration's.
local MAXUS = 9223372036854775
-- Redis's now, in µs: TIME is {seconds, microseconds}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- us converts nanoseconds (a float) to whole µs, rounded, saturating as
-- Go's durNs does; NaN is 0.
local function us(ns)
  if ns ~= ns then return 0 end                 -- NaN
  if ns >= MAXUS * 1000 then return MAXUS end   -- saturate up
  if ns <= -MAXUS * 1000 then return -MAXUS end -- saturate down
  return math.floor(ns / 1000 + 0.5)            -- round to the µs
end

-- A reader of space-separated words over one string: the ops, or a record.
local src, pos = '', 1
local function word()
  local e = string.find(src, ' ', pos, true)    -- the next space, plain
  if not e then e = #src + 1 end                -- or the end of the string
  local w = string.sub(src, pos, e - 1)         -- the word before it
  pos = e + 1                                   -- and on past the space
  return w
end
-- num reads a finite number, and raises an error on anything else.
local function num()
  local w = word()
  local n = tonumber(w)
  -- gopher-lua (miniredis) reads an exponent only after a '.': 1e+21 as 1.0e+21
  if n == nil then n = tonumber((string.gsub(w, '^([-+]?%d+)([eE])', '%1.0%2'))) end
  if n == nil or n ~= n or n == math.huge or n == -math.huge then error('retryredis: not a number') end
  return n
end
-- int reads a whole number of at most 2^54 (a time or duration in µs, a
-- flag, a version, a Seq): what this script writes, and no junk's 1e300.
local function int()
  local n = num()
  if n ~= math.floor(n) or n > 18014398509481984 or n < -18014398509481984 then error('retryredis: not an int') end
  return n
end
-- bytes reads "n:" and then n bytes as they are (the lane's Rates, binary).
local function bytes()
  local c = string.find(src, ':', pos, true)    -- the colon after the length
  if not c then error('retryredis: no length') end
  local n = tonumber(string.sub(src, pos, c - 1))
  if n == nil or n < 0 or n ~= math.floor(n) then error('retryredis: bad length') end
  local b = string.sub(src, c + 1, c + n)       -- the n bytes
  if #b ~= n then error('retryredis: short bytes') end
  pos = c + n + 2                               -- past the bytes and the space
  return b
end

-- A lane as Go's StoreLane: u Until, r Refuse, n Next, sh Shift, pu Pushed,
-- mv Moved, rn RetryNext, per Per, b Burst, sc Scaled, lim Limited, v Version, rates.
local function newLane()
  return {u = 0, r = false, n = 0, sh = 0, pu = 0, mv = 0, rn = 0, per = 0, b = 0, sc = 0, lim = 0, v = 0, rates = ''}
end
local function emptyState()
  return {seq = 0, lanes = {newLane(), newLane(), newLane(), newLane()}}
end

-- decode reads a record (see encode); it raises an error on anything else.
local function decode(raw)
  src, pos = raw, 1
  if word() ~= 'r2' then error('retryredis: not a record') end -- r1 (without Scaled): an old record, read as none
  local st = {seq = int(), lanes = {}}
  for l = 1, 4 do
    local s = newLane()
    s.u, s.r, s.n, s.sh, s.pu = int(), int() ~= 0, int(), int(), int()
    s.mv, s.rn, s.per, s.b, s.sc, s.lim = int(), int(), num(), num(), num(), int()
    s.v, s.rates = int(), bytes()
    if s.per < 0 or s.b < 0 or s.sc < 0 or s.v < 0 then error('retryredis: negative rate') end
    st.lanes[l] = s
  end
  return st
end

-- encode writes a record: "r1 seq" and each lane's fields, the times and
-- durations as whole µs, Per and Burst with 17 digits (exact), the Rates as
-- "n:" and its bytes. Go reads it (codec.go).
local function encode(st)
  local out = {'r2', string.format('%d', st.seq)}
  for l = 1, 4 do
    local s = st.lanes[l]
    out[#out + 1] = string.format('%d %d %d %d %d %d %d %.17g %.17g %.17g %d %d %d:',
      s.u, s.r and 1 or 0, s.n, s.sh, s.pu, s.mv, s.rn, s.per, s.b, s.sc, s.lim, s.v, #s.rates) .. s.rates
  end
  return table.concat(out, ' ')
end

-- The key's state: junk (another type, a record that does not parse) is
-- an empty state, overwritten below; pcall keeps a WRONGTYPE from failing.
local raw = redis.pcall('GET', KEYS[1])         -- a string, false (none), or an error table
local st = nil
if type(raw) == 'string' then
  local ok, got = pcall(decode, raw)            -- a bad record raises inside decode
  if ok then st = got end
end
if st == nil then st = emptyState() end
local L = st.lanes

-- ready: when lane s's bucket covers a charge (ns) asked at now (lanes.go).
local function ready(s, charge, retry)
  local r = s.n + us(math.min(charge, s.b) - s.b) -- Next + min(c, τ) − τ
  if not retry or not (r > now) then return r end  -- a first try: that slot
  local head = now                                 -- a retry: the grid's first slot after now
  local ahead = (s.n - now) * 1000                 -- how far Next is ahead, in ns
  -- (a slot due at now exactly is its send's, going now: the next one)
  if charge > 0 and ahead > 0 then head = s.n + us(-(math.ceil(ahead / charge) - 1) * charge) end
  return math.min(r, math.max(head, s.rn))         -- no sooner than a charge after the last retry
end

-- take: a send's slot on every lane it counts against, if its wait is
-- shorter than within (ns). Returns wait (µs), refused, took.
local function take(costs, within, retry)
  local at = now
  for l = 1, 4 do
    local s = L[l]
    if costs[l] > 0 then
      if s.r and s.u > now then return s.u - now, true, false end -- a refusing hold: fail at once
      at = math.max(at, s.u)                                     -- after the lane's hold
      if s.per > 0 then at = math.max(at, ready(s, costs[l] * s.per, retry)) end
    end
  end
  local wait = at - now
  if wait > 0 and wait * 1000 >= within then return wait, false, false end -- does not fit: take nothing
  for l = 1, 4 do
    local s = L[l]
    if costs[l] > 0 and s.per > 0 then
      local charge = costs[l] * s.per                              -- ns
      if retry then
        if s.n > at then s.pu = s.pu + us(charge) end              -- the sends waiting go a charge later
        s.rn = at + us(charge)                                     -- the next retry's earliest slot
      end
      s.n = math.max(s.n, at) + us(charge)                         -- GCRA: Next moves on by the charge
    end
  end
  return wait, false, true
end

-- holdTo: the lane's hold on to u, forward only, moving the queue on.
local function holdTo(s, u, refuse)
  local from = math.max(s.u, now)
  if not (u > from) then return end               -- a shorter hold never shortens it
  if s.n > from then                              -- sends wait past the old hold:
    local d = u - from
    s.n, s.sh, s.mv = s.n + d, s.sh + d, s.mv + d -- they go later by what the hold grew
  end
  s.r = refuse or (s.r and s.u > now)             -- a refusing hold still on stays so
  s.u = u
end

-- correct: the schedule by the provider's count (full: bucket full again).
local function correct(s, full, mark, movedAt)
  if mark == 0 then                               -- a send that was not paced
    if not (full > s.n) then return end           -- only moves Next later
    if s.n ~= 0 then s.mv = s.mv + (full - s.n) end -- (a Next never set moves no mark)
    s.n = full
    return
  end
  local d = full - (mark + (s.mv - movedAt))      -- the count against the mark, moved on since
  if d == 0 then return end
  s.n, s.mv = s.n + d, s.mv + d
end

-- untake: give back a charge (ns) if no slot was given after the mark.
local function untake(s, mark, charge)
  if mark == 0 or s.n ~= mark then return end
  s.n = s.n + us(-charge)
end

-- setRates: the lane's rates; a Per that moves by more than 5% from the
-- one the schedule was last scaled to (Scaled) scales the queue, both ways.
local function setRates(s, per, burst, rates)
  if s.sc <= 0 or per <= 0 then
    s.sc = per                                    -- nothing scaled yet, or no rate: the new one
  elseif per > s.sc * 1.05 or per < s.sc / 1.05 then
    if s.n > now then                             -- sends wait: their schedule to the new rate
      local d = us((s.n - now) * 1000 * (per / s.sc - 1))
      s.n, s.mv = s.n + d, s.mv + d
    end
    s.sc = per
  end
  s.per, s.b, s.rates, s.v = per, burst, rates, s.v + 1
end

-- finite as Go's: a number of 0 or more, else 0.
local function finite(f)
  if f ~= f or f < 0 or f == math.huge then return 0 end
  return f
end

local wait, took, refused, stale, arms = 0, false, false, false, false
local ops = ARGV[4]
if ops ~= '' then
  -- Seq: at least Redis's clock in µs, so a key lost and made again grows.
  st.seq = math.max(st.seq + 1, now)
  src, pos = ops, 1
  while pos <= #src do
    local kind = word()
    if kind == 'T' then
      local costs = {finite(num()), finite(num()), finite(num()), finite(num())}
      local within, retry = num(), num() ~= 0
      wait, refused, took = take(costs, within, retry)
    elseif kind == 'N' then
      -- an op of a kind this script does not know: it counts, and does nothing
    else
      local l = num() + 1                         -- Go's lane 0..3 is Lua's 1..4
      local s = L[l]                              -- nil when out of range: the op is read and left out
      if kind == 'H' then
        local f, refuse = num(), num() ~= 0
        if s then holdTo(s, now + us(f), refuse) end
        arms = true
      elseif kind == 'C' then
        local f, mark, moved = num(), num(), num()
        if s then correct(s, now + us(f), mark, us(moved)) end
      elseif kind == 'U' then
        local mark, charge = num(), finite(num())
        if s then untake(s, mark, charge) end
      elseif kind == 'R' then
        local v, per, burst, rates = num(), finite(num()), finite(num()), bytes()
        if s and s.v ~= v then stale = true       -- computed from an older version: left out
        elseif s then setRates(s, per, burst, rates) end
      elseif kind == 'L' then
        if s then s.lim = now end
        arms = true
      else
        error('retryredis: unknown op')
      end
    end
  end
end

local rec = encode(st)
local reply = string.format('%d %d %d %d %d ', now, wait, took and 1 or 0, refused and 1 or 0, stale and 1 or 0) .. rec
if ops ~= '' then
  -- The TTL: until the latest of the lanes' holds and schedules, plus the
  -- margin (ARGV[3]), at most a day more: a quiet key goes.
  local latest = now
  for l = 1, 4 do latest = math.max(latest, L[l].u, L[l].n, L[l].rn) end
  local ttl = math.floor(math.min(latest - now, 86400000000) / 1000) + tonumber(ARGV[3])
  redis.call('SET', KEYS[1], rec, 'PX', string.format('%d', ttl)) -- SET replaces junk of any type
  -- A hold or a limit is news for every process: push it now.
  if arms and ARGV[2] ~= '' then
    redis.call('PUBLISH', ARGV[2], ARGV[1] .. ' ' .. #KEYS[1] .. ':' .. KEYS[1] .. ' ' .. reply)
  end
end
return reply
