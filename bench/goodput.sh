#!/usr/bin/env bash
# bench/goodput.sh: the goodput tables of RESULTS.md (issue 16), from bench/:
#   1. every dialect, every row, 3 runs (about 25 minutes);
#   2. OpenAI's dialect with answers that take 800 ms, 128 workers, 3 runs;
#   3. answers that take 10 s at 10 requests/s, 64 workers, for 120 s, 2 runs.
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
