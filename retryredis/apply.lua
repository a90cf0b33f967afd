-- apply.lua: one Apply of a store.Store to one key, atomically, on Redis's
-- clock. It computes what Go's store.Apply (store/apply.go, circuit.go)
-- computes, step for step and to the bit, and nothing of the policy:
-- what to hold, at what rate to pace, is decided in Go and arrives here as
-- ops. The differential test (difftest_test.go) holds the two to each
-- other on random sequences of ops.
--
-- Units, as store.Apply's: times and spans are whole microseconds (times
-- since the Unix epoch; 0 is Go's zero Time, "never"), all below 2^53 so
-- that Lua's doubles hold them exactly; Per, Burst and a send's charge are
-- nanoseconds as floats (a token's Per can be far below one).
--
-- KEYS[1]  the key's Record, in store's encoding (store/encode.go).
-- ARGV[1]  the caller's process id: the message it publishes starts with it.
-- ARGV[2]  the channel to publish on; "" publishes nothing.
-- ARGV[3]  the ops, space-separated (codec.go's appendOps):
--          T n c1..cn within_ns priority retry circuit   OpTake
--          H lane for_ns refuse                 OpHold
--          C lane for_ns mark_us moved_ns       OpCorrect
--          U lane mark_us charge_ns             OpUntake
--          R lane version per burst n:rates     OpRates (n bytes, binary)
--          L lane                               OpLimited
--          F from failures open_ns solo probe   OpFail
--          A                                    OpAlive
--          P                                    OpProbeEnd
--          N                                    a kind unknown here: nothing
-- Returns the State after the ops in store's encoding (State.MarshalBinary):
-- "now wait took refused unavailable probe stale publish" and the Record.

-- TIME before a write: Redis 5+ replicates a script by its effects; on 3.2
-- and 4 this call makes it so, elsewhere it is a no-op.
if redis.replicate_commands then redis.replicate_commands() end

local MAXAHEAD = 3600000000      -- store.MaxAhead, in µs (an hour)
local MAXPER = 60000000000       -- store.MaxPer, in ns (a minute)
local MAXDEBT = 60000000000      -- store.MaxDebt, in ns (a minute)
local MAXBURST = 3600000000000   -- MaxAhead in ns: the most a Burst or a Charge is
local MAXSPAN = 1125899906842624 -- 2^50 µs: the most a lane's Shift, Pushes or Moved is
local MAXINT = 9007199254740992  -- 2^53: Seq, Version and times stay below it
local KEEP = 60000000            -- store.KeepFor, in µs
local LEASE = 30000000           -- store.ProbeLease, in µs
local MAXLANES, MAXRATES = 8, 256

-- Redis's now, in µs: TIME is {seconds, microseconds}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- us rounds ns (a float) to whole µs, saturating at MaxAhead; NaN is 0.
local function us(ns)
  if ns ~= ns then return 0 end                       -- NaN
  if ns >= MAXAHEAD * 1000 then return MAXAHEAD end   -- saturate up
  if ns <= -MAXAHEAD * 1000 then return -MAXAHEAD end -- and down
  return math.floor(ns / 1000 + 0.5)                  -- round to the µs
end
local function clampSpan(d) return math.max(-MAXSPAN, math.min(MAXSPAN, d)) end
local function fit(x) return math.min(x, now + MAXAHEAD) end -- a schedule within MaxAhead
local function finite(f)                              -- a number of 0 or more, else 0
  if f ~= f or f < 0 or f == math.huge then return 0 end
  return f
end

-- A reader of space-separated words over one string: the ops, or a
-- record. Its place is a table's (rd.s, rd.p), never an upvalue the
-- functions below assign: gopher-lua (miniredis) loses an upvalue's
-- assignments once a pcall has raised an error (decode, on junk).
local rd = {s = '', p = 1}
local function word()
  if rd.p > #rd.s then rd.p = #rd.s + 2; return '' end -- past the end (gopher-lua's find would panic)
  local e = string.find(rd.s, ' ', rd.p, true)        -- the next space, plain
  if not e then e = #rd.s + 1 end                     -- or the end of the string
  local w = string.sub(rd.s, rd.p, e - 1)             -- the word before it
  rd.p = e + 1                                        -- and on past the space
  return w
end
-- The words of numbers take store's grammar (store/encode.go), as Go
-- reads them, and nothing else: tonumber would take more (hex, spaces
-- around, "1e5"; gopher-lua also "1_0" and, after "0x", a binary point).
--   uint  = 0 | [1-9][0-9]*
--   int   = 0 | -?[1-9][0-9]*
--   float = -?(0 | [1-9][0-9]*)(.[0-9]+)?(e[-+][0-9]+)?
local function isUint(w) return w == '0' or string.find(w, '^[1-9]%d*$') ~= nil end
local function isInt(w) return w == '0' or string.find(w, '^%-?[1-9]%d*$') ~= nil end
local function isFloat(w)
  local i, f, e = string.match(w, '^%-?(%d+)(%.?%d*)(.*)$')
  if not i or (#i > 1 and string.sub(i, 1, 1) == '0') or f == '.' then return false end
  return e == '' or string.find(e, '^e[-+]%d+$') ~= nil
end
-- num reads a finite float, and raises an error on anything else.
local function num()
  local w = word()
  if not isFloat(w) then error('retryredis: not a number') end
  local n = tonumber(w)
  -- gopher-lua (miniredis) reads a word with no '.' as an int64 only: 1e+21 as 1.0e+21
  if n == nil then n = tonumber((string.gsub(w, '^(%-?%d+)', '%1.0', 1))) end
  if n == nil or n ~= n or n == math.huge or n == -math.huge then error('retryredis: not a number') end
  return n
end
-- whole reads a whole number spelt as ok says, under 2^53 either way.
local function whole(ok)
  local w = word()
  if not ok(w) then error('retryredis: not a whole number') end
  local n = tonumber(w)
  if n == nil or n >= MAXINT or n <= -MAXINT then error('retryredis: out of range') end
  return n
end
local function int() return whole(isInt) end
local function uint() return whole(isUint) end
-- id reads a process id as it is: a uint64 is past what a double holds.
local function id()
  local w = word()
  if not isUint(w) or #w > 20 or (#w == 20 and w > '18446744073709551615') then error('retryredis: not an id') end
  return w
end
local function flag()
  local w = word()
  if w == '1' then return true elseif w == '0' then return false end
  error('retryredis: not a flag')
end
-- bytes reads "n:" and then n bytes as they are (a lane's Rates, binary).
local function bytes()
  if rd.p > #rd.s then error('retryredis: no length') end
  local c = string.find(rd.s, ':', rd.p, true)        -- the colon after the length
  if not c then error('retryredis: no length') end
  local nw = string.sub(rd.s, rd.p, c - 1)
  if not isUint(nw) then error('retryredis: bad length') end
  local n = tonumber(nw)
  local b = string.sub(rd.s, c + 1, c + n)            -- the n bytes
  if #b ~= n then error('retryredis: short bytes') end
  rd.p = c + n + 1
  if rd.p <= #rd.s then                               -- a space after, unless at the end
    if string.sub(rd.s, rd.p, rd.p) ~= ' ' then error('retryredis: no space') end
    rd.p = rd.p + 1
  end
  return b
end

-- A lane as Go's store.Lane: u Until, r Refuse, n Next, t Tails (t[l] is
-- level l's, 1..5), sh Shift, p Pushes (p[l + 1] is level l's, 0..4), mv
-- Moved, j Jumps, fx Fixed, fl FixedLevel, fp FixedPushed, per Per, b
-- Burst, sc Scaled, lim Limited, v Version.
local NLEVELS = 6                -- store.NumLevels
local FLOOR = 9                  -- store's floorJumps: the tenth jump lets a lower head go
local function newLane()
  return {u = 0, r = false, n = 0, t = {0, 0, 0, 0, 0}, sh = 0, p = {0, 0, 0, 0, 0}, mv = 0, j = 0, fx = 0, fl = 0, fp = 0,
    per = 0, b = 0, sc = 0, lim = 0, v = 0, rates = ''}
end
-- A circuit as Go's store.Circuit: f Failures, from From, many Many, last
-- Last, open Open, since Since, probe Probe.
local function newCircuit() return {f = 0, from = '0', many = false, last = 0, open = 0, since = 0, probe = 0} end
local function emptyRecord() return {seq = 0, lanes = {}, c = newCircuit()} end

-- valid is store.Record.Valid at now.
local function okTime(x) return x == 0 or (x > 0 and x <= now + MAXAHEAD) end
local function okSpan(x) return x >= -MAXSPAN and x <= MAXSPAN end
local function levelsOK(s)
  for i = 1, NLEVELS - 1 do
    if not (okTime(s.t[i]) and okSpan(s.p[i])) then return false end
  end
  return s.j >= 0 and s.j < MAXINT and s.fl >= 0 and s.fl < NLEVELS - 1
end
local function valid(st)
  for _, s in ipairs(st.lanes) do
    if not (okTime(s.u) and okTime(s.n) and okTime(s.fx) and okTime(s.lim) and okSpan(s.sh) and okSpan(s.mv)
      and okSpan(s.fp) and levelsOK(s) and s.per >= 0 and s.per <= MAXPER and s.sc >= 0 and s.sc <= MAXPER
      and s.b >= 0 and s.b <= MAXBURST and s.v >= 0 and #s.rates <= MAXRATES) then return false end
  end
  local c = st.c
  return st.seq >= 0 and c.f >= 0 and okTime(c.last) and okTime(c.open) and okTime(c.since) and okTime(c.probe)
end

-- decode reads a record (store's encoding); it raises an error on anything
-- else, as Go's UnmarshalBinary returns one.
local function decode(raw)
  rd.s, rd.p = raw, 1
  if word() ~= 'r4' then error('retryredis: not a record') end -- r3 and older: read as none
  local st = {seq = uint(), lanes = {}}
  local n = int()
  if n < 0 or n > MAXLANES then error('retryredis: lanes') end
  for l = 1, n do
    local s = newLane()
    s.u, s.r, s.n = int(), flag(), int()
    for i = 1, NLEVELS - 1 do s.t[i] = int() end
    s.sh = int()
    for i = 1, NLEVELS - 1 do s.p[i] = int() end
    s.mv, s.j, s.fx, s.fl, s.fp = int(), int(), int(), int(), int()
    s.per, s.b, s.sc, s.lim, s.v, s.rates = num(), num(), num(), int(), uint(), bytes()
    st.lanes[l] = s
  end
  local c = newCircuit()
  c.f, c.from, c.many, c.last, c.open, c.since, c.probe = int(), id(), flag(), int(), int(), int(), int()
  st.c = c
  if rd.p <= #rd.s then error('retryredis: trailing bytes') end
  return st
end

-- encode writes a record in store's encoding; Go reads it.
local function encode(st)
  local out = {'r4', string.format('%d %d', st.seq, #st.lanes)}
  for _, s in ipairs(st.lanes) do
    out[#out + 1] = string.format('%d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %.17g %.17g %.17g %d %d %d:',
      s.u, s.r and 1 or 0, s.n, s.t[1], s.t[2], s.t[3], s.t[4], s.t[5], s.sh, s.p[1], s.p[2], s.p[3], s.p[4], s.p[5],
      s.mv, s.j, s.fx, s.fl, s.fp, s.per, s.b, s.sc, s.lim, s.v, #s.rates) .. s.rates
  end
  local c = st.c
  out[#out + 1] = string.format('%d %s %d %d %d %d %d', c.f, c.from, c.many and 1 or 0, c.last, c.open, c.since, c.probe)
  return table.concat(out, ' ')
end

-- The key's Record: junk (another type, bytes that do not decode, a record
-- out of range) is the zero Record, overwritten below; pcall keeps a
-- WRONGTYPE from failing.
local raw = redis.pcall('GET', KEYS[1])               -- a string, false (none), or an error table
local st = nil
if type(raw) == 'string' and #raw <= 8192 then         -- longer than store.MaxEncoded: junk, unparsed
  local ok, got = pcall(decode, raw)                  -- a bad record raises inside decode
  if ok and valid(got) then st = got end
end
if st == nil then st = emptyRecord() end
local L, C = st.lanes, st.c

-- lane returns lane i (0-based), made with those before it; nil past MaxLanes.
local function lane(i)
  if i < 0 or i >= MAXLANES or i ~= math.floor(i) then return nil end
  while #L <= i do L[#L + 1] = newLane() end
  return L[i + 1]
end

-- charge is store.Lane.Charge: cost × Per, at most the whole bucket.
local function charge(s, cost)
  local debt = s.b
  if debt <= 0 then debt = MAXDEBT end
  return math.min(cost * s.per, debt)
end

-- tail: the end of the schedule of the sends of level l and above.
local function tail(s, l)
  if l <= 0 then return s.n end
  return s.t[l]
end

-- ready: when lane s's bucket covers a charge (ns) asked at now, for a
-- send of level l: the lowest level takes the bucket's slot; a higher one
-- the grid's first slot after now and after its level's tail, jumping the
-- sends waiting of lower levels.
local function ready(s, c, l)
  local r = s.n + us(math.min(c, s.b) - s.b)          -- Next + min(c, τ) − τ
  if l == 0 or not (r > now) then return r end         -- the lowest level: that slot
  local head = now                                     -- the grid's first slot after now
  local ahead = (s.n - now) * 1000                     -- how far Next is ahead, in ns
  if c > 0 and ahead > 0 then head = s.n + us(-(math.ceil(ahead / c) - 1) * c) end
  return math.min(r, math.max(head, tail(s, l)))       -- after the sends of its level and above
end

-- lowerHead: the level of the first send waiting behind a slot at at, and
-- whether it is of a lower priority than level l's (a jump the floor counts).
local function lowerHead(s, at, l)
  if l == 0 or not (s.n > at) then return 0, false end
  for h = l - 1, 0, -1 do
    if tail(s, h) > math.max(tail(s, h + 1), now) then
      return h, math.floor(h / 2) < math.floor(l / 2)
    end
  end
  return 0, false
end

-- slot: ready's slot, or, the tenth jump in a row over a lower priority,
-- the slot after the first of them (R27's floor).
local function slot(s, c, l)
  local at = ready(s, c, l)
  local _, ok = lowerHead(s, at, l)
  if ok and s.j >= FLOOR then return at + us(c) end
  return at
end

-- book: the send's slot at at on lane s: the lower levels waiting behind
-- it go a charge later, the tails of its level and below past it, and a
-- jump over a lower priority counted (the tenth keeps their first's slot).
local function book(s, at, c, l)
  local h, ok = lowerHead(s, at, l)
  if ok then
    if not (tail(s, l) > now) then s.j = 0 end         -- its level and above had all gone
    if s.j >= FLOOR then
      s.fx, s.fl, s.fp, s.j = fit(at + us(-c)), h, s.p[h + 1], 0
    else
      s.j = s.j + 1
    end
  end
  if s.n > at then
    for i = 1, math.min(l, NLEVELS - 1) do s.p[i] = clampSpan(s.p[i] + us(c)) end -- the lower levels go a charge later
  end
  for i = l, 1, -1 do s.t[i] = fit(math.max(s.t[i], at) + us(c)) end
  s.n = fit(math.max(s.n, at) + us(c))                 -- GCRA: Next moves on by the charge
  return ok                                            -- a jump over a lower priority: news
end

-- moveWaiting: the tails and the fixed head's slot after from move on by
-- what by says of each.
local function moveWaiting(s, from, by)
  for i = 1, NLEVELS - 1 do
    if s.t[i] > from then s.t[i] = fit(s.t[i] + by(s.t[i])) end
  end
  if s.fx > from then s.fx = fit(s.fx + by(s.fx)) end
end

-- The Result: the last take's, and what the ops did.
local R = {wait = 0, took = false, refused = false, unavailable = false, probe = false, stale = false, publish = false}

-- take: OpTake (costs a table of n, within ns, at level l).
local function take(costs, within, l, circuit)
  R.wait, R.took, R.refused, R.unavailable, R.probe = 0, false, false, false, false
  local probe = false
  if circuit and C.open ~= 0 then
    if now < C.open or (C.probe ~= 0 and now < C.probe) then R.unavailable = true; return end
    probe = true                                       -- open past its time: this take probes
  end
  local n = math.min(#costs, #L)
  local at = now
  for i = 1, n do
    local s, cost = L[i], costs[i]
    if cost > 0 then
      if s.r and s.u > now then R.wait, R.refused = s.u - now, true; return end -- a refusing hold
      at = math.max(at, s.u)                           -- after the lane's hold
      if s.per > 0 then at = math.max(at, slot(s, charge(s, cost), l)) end
    end
  end
  R.wait = at - now
  if R.wait > 0 and R.wait * 1000 >= within then return end -- does not fit: take nothing
  for i = 1, n do
    local s, cost = L[i], costs[i]
    if cost > 0 and s.per > 0 and book(s, at, charge(s, cost), l) then R.publish = true end -- sends waiting moved back
  end
  R.took = true
  if probe then C.probe, R.probe = fit(at + LEASE), true end -- the lease runs from the probe's slot
end

-- holdTo: the lane's hold on to u, forward only, moving the queue on.
local function holdTo(s, u, refuse)
  local from = math.max(s.u, now)
  if not (u > from) then return false end             -- a shorter hold never shortens it
  if s.n > from then                                  -- sends wait past the old hold:
    local d = u - from                                -- they go later by what it grew
    s.n, s.sh, s.mv = fit(s.n + d), clampSpan(s.sh + d), clampSpan(s.mv + d)
    moveWaiting(s, from, function() return d end)     -- every level's, and the fixed head's
  end
  s.r = refuse or (s.r and s.u > now)                 -- a refusing hold still on stays so
  s.u = u
  return true
end

-- correct: the bucket full again at full, as of the send whose take left
-- Next at mark (0: a send not paced, which only moves Next later).
local function correct(s, full, mark, movedAt)
  if mark == 0 then
    if full > s.n then
      if s.n ~= 0 then s.mv = clampSpan(s.mv + clampSpan(full - s.n)) end -- (a Next never set moves no mark)
      s.n = full
    end
    return
  end
  if s.n == 0 then return end                         -- no take ever gave a mark on this lane
  local d = clampSpan(full - (mark + clampSpan(s.mv - movedAt))) -- the count against the mark, moved on since
  s.n, s.mv = fit(s.n + d), clampSpan(s.mv + d)
  for i = 1, NLEVELS - 1 do                           -- no level's schedule ends past the whole
    if s.t[i] ~= 0 and s.t[i] > s.n then s.t[i] = s.n end -- (0 is Go's zero time, before any Next)
  end
end

-- setRates: the lane's rates; a Per that moves by more than 5% from the
-- one the schedule was last scaled to (Scaled) scales the queue, both ways.
local function setRates(s, per, burst, rates)
  if s.sc <= 0 or per <= 0 then
    s.sc = per                                        -- nothing scaled yet, or no rate: the new one
  elseif per > s.sc * 1.05 or per < s.sc / 1.05 then
    if s.n > now then                                 -- sends wait: their schedule to the new rate
      local scale = per / s.sc - 1
      local d = us((s.n - now) * 1000 * scale)
      s.n, s.mv = fit(s.n + d), clampSpan(s.mv + d)
      moveWaiting(s, now, function(x) return us((x - now) * 1000 * scale) end)
    end
    s.sc = per
  end
  s.per, s.b, s.rates, s.v = per, burst, rates, s.v + 1
end

-- fail: OpFail, the circuit's row (store.Circuit.fail). It returns
-- whether the circuit opened or the row started (news every process hears).
local function fail(from, failures, open, solo, probe)
  if open <= 0 then open = 1000000000 end             -- DefaultOpen, in ns
  if failures <= 0 then failures = 5 end              -- DefaultFailures
  open = math.max(math.min(us(open), MAXAHEAD), 1)
  if probe and C.open ~= 0 and C.probe ~= 0 then      -- the probe failed: open again
    C.last, C.open, C.probe = now, now + open, 0
    return true
  end
  if C.open == 0 and C.f > 0 and now >= C.last + KEEP then C.f = 0 end -- a row a minute old starts again
  local started = C.f == 0
  if started then C.from, C.many = from, false        -- the row's first failure names its process
  elseif from ~= C.from then C.many = true end        -- another process failed in it too
  if C.f < MAXINT - 1 then C.f = C.f + 1 end
  C.last = now
  if C.open ~= 0 or C.f < failures or (not C.many and not solo) then return started end
  C.open, C.since = now + open, now                   -- the row opens the circuit
  return true
end

-- markOf: a mark before the epoch or past 2^53 µs is none.
local function markOf(m)
  if m <= 0 or m >= MAXINT then return 0 end
  return m
end

local ops = ARGV[3]
if ops ~= '' then
  -- Seq: at least Redis's clock in µs, so a key lost and made again grows.
  st.seq = math.max(st.seq + 1, now)
  rd.s, rd.p = ops, 1
  while rd.p <= #rd.s do
    local kind = word()
    if kind == 'T' then
      local costs = {}
      for i = 1, num() do costs[i] = finite(num()) end
      local within, priority, retry, circuit = num(), num(), num() ~= 0, num() ~= 0
      local l = 2 * (math.max(-1, math.min(1, priority)) + 1) -- store.Op.Level
      if retry then l = l + 1 end
      take(costs, within, l, circuit)
    elseif kind == 'F' then
      local from = word()
      local failures, open, solo, probe = num(), num(), num() ~= 0, num() ~= 0
      if fail(from, failures, open, solo, probe) then R.publish = true end
    elseif kind == 'A' then
      if C.open ~= 0 then R.publish = true end
      st.c = newCircuit(); C = st.c
    elseif kind == 'P' then
      C.probe = 0
    elseif kind == 'N' then
      -- an op of a kind this script does not know: nothing
    else
      local i = num()                                 -- Go's lane 0..7 is Lua's 1..8
      if kind == 'H' then
        local f, refuse = num(), num() ~= 0
        local s = lane(i)
        if s and holdTo(s, now + us(f), refuse) then R.publish = true end
      elseif kind == 'C' then
        local f, mark, moved = num(), markOf(num()), num()
        local s = lane(i)
        if s then correct(s, now + us(f), mark, us(moved)) end
      elseif kind == 'U' then
        local mark, c = markOf(num()), math.min(finite(num()), MAXBURST)
        local s = (i >= 0 and i < #L and i == math.floor(i)) and L[i + 1] or nil -- an Untake makes no lane
        if s and mark ~= 0 and s.n == mark then
          for t = 1, NLEVELS - 1 do
            if s.t[t] == mark then s.t[t] = s.t[t] + us(-c) end
          end
          s.n = s.n + us(-c)
        end
      elseif kind == 'R' then
        local v, per, burst, rates = num(), num(), num(), bytes()
        if #rates <= MAXRATES then
          local s = lane(i)
          if s and s.v ~= v then R.stale = true       -- computed from an older version: left out
          elseif s then
            per = math.min(finite(per), MAXPER)
            if s.per <= 0 and per > 0 then R.publish = true end -- the lane paced at last: every process watches it
            setRates(s, per, math.min(finite(burst), MAXBURST), rates)
          end
        end
      elseif kind == 'L' then
        local s = lane(i)
        if s then s.lim = now; R.publish = true end
      else
        error('retryredis: unknown op')
      end
    end
  end
end

local rec = encode(st)
local b = function(v) return v and 1 or 0 end
local reply = string.format('%d %d %d %d %d %d %d %d ', now, R.wait, b(R.took), b(R.refused), b(R.unavailable),
  b(R.probe), b(R.stale), b(R.publish)) .. rec
if ops ~= '' then
  -- The TTL: store.Record.Expires, KeepFor past the latest time in it.
  local latest = now
  for _, s in ipairs(L) do latest = math.max(latest, s.u, s.n, s.fx, s.t[1], s.t[2], s.t[3], s.t[4], s.t[5]) end
  latest = math.max(latest, C.open, C.probe)
  local ttl = math.floor((latest - now + KEEP) / 1000)
  redis.call('SET', KEYS[1], rec, 'PX', string.format('%d', ttl)) -- SET replaces junk of any type
  -- News for every process: push it now.
  if R.publish and ARGV[2] ~= '' then
    redis.call('PUBLISH', ARGV[2], ARGV[1] .. ' ' .. #KEYS[1] .. ':' .. KEYS[1] .. ' ' .. reply)
  end
end
return reply
