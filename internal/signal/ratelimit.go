package signal

import (
	"github.com/retryhttp/retryhttp/store"
	"net/http"
	"strings"
	"time"
)

// RateLimitReset is retryhttp.ParseRateLimitReset (R18, rate-limit
// headers): how long until an exhausted limit resets, the longest of them.
func RateLimitReset(h http.Header, now time.Time) (d time.Duration, ok bool) {
	resets, _, exhausted := LaneResets(h, now)
	for l := range resets {
		if exhausted[l] && (!ok || resets[l] > d) {
			d, ok = resets[l], true
		}
	}
	return d, ok
}

// rlPairs are the remaining/reset header pairs of R18, by their canonical
// names, each with how its reset reads.
var rlPairs = [...]struct {
	remaining, reset string
	parse            func(v string, now time.Time) (time.Duration, bool)
	lane             store.LaneID
	ms               bool // written to the millisecond (OpenAI's), whatever the value's last figure
}{
	{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests", parseResetDuration, store.Requests, true},
	{"X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens", parseResetDuration, store.Tokens, true},
	{"Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset", parseResetTime, store.Requests, false},
	{"Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset", parseResetTime, store.Tokens, false},
	{"Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset", parseResetTime, store.InputTokens, false},
	{"Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset", parseResetTime, store.OutputTokens, false},
	{"Ratelimit-Remaining", "Ratelimit-Reset", parseResetSeconds, store.Requests, false},
}

// rlStructured is the index in rlFields of the structured RateLimit field;
// the pair i of rlPairs is at 2i (remaining) and 2i+1 (reset).
const rlStructured = 2 * len(rlPairs)

// rlNames are the canonical names of the fields of rlFields, by index.
var rlNames = func() (names [rlStructured + 1]string) {
	for i, p := range rlPairs {
		names[2*i], names[2*i+1] = p.remaining, p.reset
	}
	names[rlStructured] = "Ratelimit"
	return names
}()

// rlFields holds the values of every header R18 reads, found in one pass over
// the map: ParseRateLimitReset may run on every response (R17), so it costs a
// walk of the header and no allocation, not a lookup per name with a
// case-insensitive fallback scan per missing name.
type rlFields [rlStructured + 1]rlField

type rlField struct {
	key  string   // the spelling the values came from
	vals []string // nil when absent
}

func (f *rlFields) collect(h http.Header) {
	for k, vals := range h {
		i := rlIndex(k)
		if i < 0 || len(vals) == 0 {
			continue
		}
		// The canonical spelling wins (it is what h.Get reads); among other
		// spellings of one name in a hand-built map, the smallest, so the
		// answer does not depend on the map's order.
		name, cur := rlNames[i], &f[i]
		if cur.vals == nil || k == name || cur.key != name && k < cur.key {
			cur.key, cur.vals = k, vals
		}
	}
}

// first is the field's first value, trimmed; "" when absent.
func (f *rlField) first() string {
	if len(f.vals) == 0 {
		return ""
	}
	return trimSpaceTab(f.vals[0])
}

// rlLengths has bit n set when a name of rlNames is n bytes long.
var rlLengths = func() (bits uint64) {
	for _, name := range rlNames {
		bits |= 1 << len(name)
	}
	return bits
}()

// rlIndex is the index in rlFields of the header named k in any case, or -1.
func rlIndex(k string) int {
	if len(k) >= 64 || rlLengths&(1<<len(k)) == 0 {
		return -1 // most headers: no name of R18 is that long
	}
	for i, name := range rlNames {
		if len(k) == len(name) && (k == name || strings.EqualFold(k, name)) {
			return i
		}
	}
	return -1
}

// isZeroCount reports whether a remaining count is a plain integer equal to
// 0 ("0", "00"). Negative counts (Azure's -1), fractions and the rest are not.
func isZeroCount(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

// parseResetSeconds reads a reset in delta-seconds ("30", "1.5"), saturating.
func parseResetSeconds(v string, _ time.Time) (time.Duration, bool) {
	return parseDecimal(v, time.Second)
}

// parseResetTime reads an RFC 3339 reset time as the wait from now; a time
// in the past is 0.
func parseResetTime(v string, now time.Time) (time.Duration, bool) {
	if v == "" || v[0] < '0' || v[0] > '9' {
		return 0, false // every RFC 3339 time starts with its year; spare time.Parse's error
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true // Sub saturates; it never wraps
}

// parseResetDuration reads a reset as OpenAI writes it: bare seconds ("17",
// "0.5"), or a sequence of decimal counts, each with a unit ("6m0s",
// "1m30.5s", "20ms"). Unlike time.ParseDuration it rejects signs and
// saturates at the largest Duration instead of failing.
func parseResetDuration(v string, _ time.Time) (time.Duration, bool) {
	if d, ok := parseDecimal(v, time.Second); ok {
		return d, true
	}
	if v == "" {
		return 0, false
	}
	var total time.Duration
	for v != "" {
		n := 0 // the count: digits and dots, checked by parseDecimal
		for n < len(v) && (v[n] >= '0' && v[n] <= '9' || v[n] == '.') {
			n++
		}
		u := n // the unit: everything up to the next count
		for u < len(v) && (v[u] < '0' || v[u] > '9') && v[u] != '.' {
			u++
		}
		unit, ok := durationUnit(v[n:u])
		if !ok {
			return 0, false
		}
		d, ok := parseDecimal(v[:n], unit)
		if !ok {
			return 0, false
		}
		if d > maxDuration-total {
			total = maxDuration // keep reading: the rest must still parse
		} else {
			total += d
		}
		v = v[u:]
	}
	return total, true
}

// durationUnit is the length of a unit of time.ParseDuration.
func durationUnit(s string) (time.Duration, bool) {
	switch s {
	case "ns":
		return time.Nanosecond, true
	case "us", "µs", "μs": // U+00B5 and U+03BC, as time.ParseDuration
		return time.Microsecond, true
	case "ms":
		return time.Millisecond, true
	case "s":
		return time.Second, true
	case "m":
		return time.Minute, true
	case "h":
		return time.Hour, true
	}
	return 0, false
}

// parseRateLimitField reads one line of the structured RateLimit field, a
// list of items such as `"default";r=0;t=30` (an sf-string or token, then
// ;key=value parameters), and returns the longest t of its items whose r is
// 0. A malformed item leaves only itself out.
func parseRateLimitField(s string) (longest time.Duration, ok bool) {
	for s != "" {
		var item string
		item, s = cutUnquoted(s, ',')
		if d, exhausted := parseRateLimitItem(trimSpaceTab(item)); exhausted && (!ok || d > longest) {
			longest, ok = d, true
		}
	}
	return longest, ok
}

// parseRateLimitItem reads one item of the RateLimit field: its reset, and
// whether it is exhausted (r=0 with a t that parses).
func parseRateLimitItem(item string) (time.Duration, bool) {
	bare, params := cutUnquoted(item, ';')
	if !validBareItem(trimSpaceTab(bare)) {
		return 0, false
	}
	var r, t string
	var hasR, hasT bool
	for params != "" {
		var p string
		p, params = cutUnquoted(params, ';')
		key, val, _ := strings.Cut(p, "=")
		switch trimSpaceTab(key) {
		case "r": // a repeated parameter: the last one counts (RFC 8941, 4.2.3.2)
			r, hasR = trimSpaceTab(val), true
		case "t":
			t, hasT = trimSpaceTab(val), true
		}
	}
	if !hasR || !hasT || !isZeroCount(r) {
		return 0, false
	}
	return parseDecimal(t, time.Second)
}

// validBareItem reports whether s is a non-empty token or a whole quoted
// string: the policy name that opens each item of the RateLimit field.
func validBareItem(s string) bool {
	if s == "" {
		return false
	}
	if s[0] != '"' {
		return !strings.ContainsAny(s, "\" \t=")
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i == len(s)-1
		}
	}
	return false // no closing quote
}

// cutUnquoted is strings.Cut on the byte sep (after is "" when s has none), skipping any sep inside a
// quoted string (with its backslash escapes).
func cutUnquoted(s string, sep byte) (before, after string) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// parseCount reads a plain non-negative integer, saturating.
func parseCount(s string) (int64, bool) {
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		if n > (1<<62)/10 {
			return 1 << 62, true
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, len(s) > 0
}

// resetResolution is the resolution a reset was written at: the unit of its
// last figure ("20ms": 1 ms; "6m0s": 1 s; "1.5s": 100 ms; an RFC 3339 time
// without fraction: 1 s).
func resetResolution(v string) time.Duration {
	unit := time.Second
	switch {
	case strings.HasSuffix(v, "ms"):
		unit, v = time.Millisecond, v[:len(v)-2]
	case strings.HasSuffix(v, "us"), strings.HasSuffix(v, "µs"), strings.HasSuffix(v, "μs"):
		unit = time.Microsecond
		v = strings.TrimRight(v, "usµμ")
	case strings.HasSuffix(v, "ns"):
		return time.Nanosecond
	case strings.HasSuffix(v, "Z") || strings.ContainsAny(v, "T+"):
		// RFC 3339: the seconds' fraction, before the zone.
		if i := strings.LastIndexAny(v, "Z+-"); i > strings.IndexByte(v, 'T') {
			v = v[:i]
		}
	default:
		v = strings.TrimRight(v, "smh")
	}
	if i := strings.LastIndexByte(v, '.'); i >= 0 {
		for range len(v) - i - 1 {
			unit /= 10
		}
	}
	return max(unit, time.Nanosecond)
}
