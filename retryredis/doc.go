// Package retryredis keeps retryhttp Cooldowns' state on Redis (R24), so
// that K replicas of a backend behind one provider account (one API key,
// one limit) pace together at the provider's rate instead of K times it,
// and each hears what any of them heard:
//
//	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
//	store := retryredis.NewStore(rdb, retryredis.WithLogger(log))
//	defer store.Close()
//	cooldown := retryhttp.NewCooldown(nil, retryhttp.WithStore(store))
//	defer cooldown.Close()
//	client := &http.Client{Transport: retryhttp.New(http.DefaultTransport, retryhttp.WithCooldown(cooldown))}
//
// The policy (what to hold, at what rate to pace) stays in retryhttp, in
// Go; this package holds only the Redis side: the client calls, two Lua
// scripts (apply.lua, index.lua, embedded) and the fail-open rules.
//
// Keys. A Cooldown key's state is one string at prefix+"key:"+key (the
// record apply.lua writes: Seq and each lane's hold, schedule and rates;
// times in µs of Redis's clock, the policy's Rates as they are). Keys
// armed lately are scored in the sorted set prefix+"armed"; the pub/sub
// channel is prefix+"armed" too. Every script touches one key, so Redis
// Cluster works. Every key has a TTL: a state, a minute past the latest of
// its holds and schedules (at most a day more); the index, 20 s past its
// latest arming.
//
// Round trips. A key that no process watches costs nothing: the Cooldown
// does not call its Store for it. A paced send is one round trip: EVALSHA
// of apply.lua with the send's take and the news of earlier answers,
// which returns the key's whole state and Redis's now. An answer that
// holds or limits a lane is applied at once, and its round trip is a
// pipeline of apply.lua, which also PUBLISHes the new state, and
// index.lua, which scores the key in the index. Another process's Listen
// hears the message within that round trip; a process whose subscription
// was down (or that started later) finds the key in the index, which it
// polls every 500 ms and at once after a resubscription: within a second
// in any case. EVALSHA falls back to EVAL when Redis lacks the script.
//
// Failing open. Each operation is bounded by WithTimeout (30 ms by
// default) and by the caller's context; one that fails or does not
// answer in time returns an error, and the Cooldown goes on with its own
// state for that call: no call fails, or waits past the bound, because of
// Redis. After 3 failures in a row the breaker skips Redis for 500 ms,
// then lets one operation try (WithBreaker); its opening is one zap Warn,
// its closing one Info. When Redis is back the Cooldowns push back what it
// lost (rates, holds) with their next operations, and the fleet paces together
// again within a second. Data at a key that does not parse (another type,
// a record cut short or out of range) is read as nothing and overwritten.
//
// Logs. The Store logs only its breaker's changes (WithLogger, WithSlog).
// go-redis logs on its own, for the whole process, unstructured on
// stderr; redis.SetLogger(RedisLogger(log)) or RedisSlog routes its lines
// to the service's logger, sampled (RedisLog).
//
// Redis 6.2+ or Valkey. The tests run against a real redis-server;
// examples/fleet runs on REDIS_ADDR or on miniredis, which runs the same
// scripts (see README.md).
package retryredis
