#!/usr/bin/env bash
# bench/goodput.sh: the goodput tables of RESULTS.md (issues 16 and 22), from bench/:
#   1. every dialect, every row, 3 runs (about 25 minutes);
#   2. OpenAI's dialect with answers that take 800 ms, 128 workers, 3 runs;
#   3. answers that take 10 s at 10 requests/s, 64 workers, for 120 s, 2 runs;
#   4. issue 22's token limit: 50,000 tokens/s (bucket 50,000) as well as
#      100 requests/s (burst 10), prompts of 100 to 4,000 tokens, 64 workers,
#      400 calls, every dialect, the two retries10 rows, 3 runs;
#   5. issue 23's fleet, K = 8 and 32, sharing a Redis or not, both loads.
# Each writes a markdown section to out/goodput-*.md (not committed);
# RESULTS.md quotes them. RUNS=1 bench/goodput.sh for a quick look.
set -euo pipefail
cd "$(dirname "$0")"
RUNS="${RUNS:-3}"
mkdir -p out
go build -o out/goodput ./cmd/goodput
out/goodput -dialect all -runs "$RUNS" > out/goodput-dialects.md
out/goodput -latency 800ms -workers 128 -runs "$RUNS" -rows '^retryhttp\+retries10$|^retryhttp\+cooldown\+retries10$|^failsafe-go$' > out/goodput-800ms.md
out/goodput -rate 10 -latency 10s -duration 120s -runs "$(( RUNS > 2 ? 2 : RUNS ))" -rows '^retryhttp(\+retries10)?$|cooldown' > out/goodput-10s.md
out/goodput -dialect all -tokens-rate 50000 -tokens-burst 50000 -calls 400 -runs "$RUNS" -rows '^retryhttp\+retries10$|^retryhttp\+cooldown\+retries10$' > out/goodput-tokens.md
# 5. issue 23's fleet: K replicas (8, then 32), each with its own Cooldown, on their own and sharing one
#    Redis (a redis-server started for the run), in the request load and in the token load.
for k in 8 32; do
  out/goodput -dialect all -replicas "$k" -runs "$RUNS" -rows '^retryhttp\+cooldown\+retries10(\+redis)?$' > "out/goodput-fleet-$k.md"
  out/goodput -dialect all -replicas "$k" -tokens-rate 50000 -tokens-burst 50000 -calls 400 -runs "$RUNS" -rows '^retryhttp\+cooldown\+retries10(\+redis)?$' > "out/goodput-fleet-$k-tokens.md"
done
