package signal

import (
	"bufio"
	"github.com/retryhttp/retryhttp/store"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The kit's fake Provider writes each provider's 429 bodies; bodyLimits
// reads them. These tests hold the two together, so that neither drifts
// from the other: every 429 of the kit's golden file, and a 429 of every
// limit in every dialect, is attributed to the limit that refused it.

// goldenSection is one dialect's scenario in the kit's golden file: the
// bodies of its 429s, in order, and the Provider's Stats at its end.
type goldenSection struct {
	bodies []string
	stats  map[string]int64
}

var (
	goldenHeader = regexp.MustCompile(`^[A-Z][A-Za-z0-9-]*: `)
	goldenStat   = regexp.MustCompile(`(\w+):(-?\d+)\b`)
)

// readGolden reads retryhttptest/testdata/provider_answers.golden, by
// dialect name.
func readGolden(t testing.TB) map[string]*goldenSection {
	t.Helper()
	f, err := os.Open("../../retryhttptest/testdata/provider_answers.golden")
	require.NoError(t, err)
	defer f.Close()
	sections := map[string]*goldenSection{}
	var cur *goldenSection
	status, in429 := false, false // the next line is a status; in a 429's headers
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "## "), ":")
			cur = &goldenSection{stats: map[string]int64{}}
			sections[name] = cur
		case cur == nil:
		case strings.HasPrefix(line, "# at "):
			status = true
		case status:
			status, in429 = false, line == "429"
		case in429 && !goldenHeader.MatchString(line):
			cur.bodies, in429 = append(cur.bodies, line), false
		case strings.HasPrefix(line, "{Requests:"):
			for _, m := range goldenStat.FindAllStringSubmatch(line, -1) {
				cur.stats[m[1]], _ = strconv.ParseInt(m[2], 10, 64)
			}
		}
	}
	require.NoError(t, sc.Err())
	return sections
}

// refusal is what a 429's body should say: the limit that refused, and
// whether the call can never succeed.
type refusal struct {
	hit      Lanes
	tooLarge bool
}

// GoString prints r with its lanes named.
func (r refusal) GoString() string {
	return "{" + r.hit.GoString() + " tooLarge:" + strconv.FormatBool(r.tooLarge) + "}"
}

// goldenRefusals are the limits that refuse the golden scenario's four
// 429s in each dialect (retryhttptest's goldenSteps): the tokens; the
// requests (Anthropic: its output tokens); a call larger than the token
// bucket (Anthropic: its input tokens); an outage, which refuses every
// request. The bare dialect names none.
var goldenRefusals = map[string][]refusal{
	"openai":      {{lanes(store.Tokens), false}, {lanes(store.Requests), false}, {lanes(store.Tokens), true}, {lanes(store.Requests), false}},
	"anthropic":   {{lanes(store.Tokens), false}, {lanes(store.OutputTokens), false}, {lanes(store.InputTokens), false}, {lanes(store.Requests), false}},
	"retry-after": {{lanes(store.Tokens), false}, {lanes(store.Requests), false}, {lanes(store.Tokens), false}, {lanes(store.Requests), false}},
	"gemini":      {{lanes(store.Tokens), false}, {lanes(store.Requests), false}, {lanes(store.Tokens), false}, {lanes(store.Requests), false}},
	"bare":        {{}, {}, {}, {}},
}

// TestBodyLimitsGolden: each 429 body of the kit's golden file is
// attributed to the limit the Provider refused it by, and the attributions
// of each dialect add up to the Provider's own count of its refusals.
func TestBodyLimitsGolden(t *testing.T) {
	sections := readGolden(t)
	for _, d := range retryhttptest.Dialects() {
		t.Run(d.String(), func(t *testing.T) {
			s := sections[d.String()]
			require.NotNil(t, s, "the golden file has the dialect")
			require.Len(t, s.bodies, int(s.stats["Refused"]), "a body for each refusal")
			want := goldenRefusals[d.String()]
			require.Len(t, s.bodies, len(want))
			var count [NumLanes]int64
			var tooLarge int64
			for i, body := range s.bodies {
				hit, large := bodyLimits([]byte(body))
				assert.Equal(t, want[i], refusal{hit, large}, "429 #%d: %s", i+1, body)
				for l := range NumLanes {
					if hit.Has(store.LaneID(l)) {
						count[l]++
					}
				}
				if large {
					tooLarge++
				}
			}
			if d == retryhttptest.BareDialect {
				assert.Equal(t, [NumLanes]int64{}, count, "a bare 429 names no limit")
				return
			}
			st := s.stats
			assert.Equal(t, [NumLanes]int64{st["RefusedRequests"] + st["RefusedOutage"], st["RefusedTokens"], st["RefusedInputTokens"], st["RefusedOutputTokens"]}, count,
				"429s attributed to each lane, against the Provider's Stats (an outage refuses requests)")
			if d == retryhttptest.OpenAIDialect {
				assert.Equal(t, st["TooLarge"], tooLarge, "OpenAI says Request too large")
			} else {
				assert.Zero(t, tooLarge, "only OpenAI's body says a call is too large")
			}
		})
	}
}

// providerLimits are the limits TestBodyLimitsProvider makes refuse a
// call: each set alone on a Provider, the last of sends calls refused.
var providerLimits = []struct {
	name      string
	anthropic bool // a limit only AnthropicDialect has
	openAI    bool // a refusal only OpenAIDialect makes
	cfg       func(c *retryhttptest.ProviderConfig)
	body      string
	sends     int
	outage    bool
}{
	{"requests", false, false, func(c *retryhttptest.ProviderConfig) { c.Requests = retryhttptest.Limit{Rate: 1, Size: 1} }, `{"model":"m"}`, 2, false},
	{"tokens", false, false, func(c *retryhttptest.ProviderConfig) { c.Tokens = retryhttptest.Limit{Rate: 1, Size: 100} }, `{"model":"m","x":"` + pad(282) + `"}`, 2, false},
	{"input tokens", true, false, func(c *retryhttptest.ProviderConfig) { c.InputTokens = retryhttptest.Limit{Rate: 1, Size: 100} }, `{"model":"m","x":"` + pad(282) + `"}`, 2, false},
	{"output tokens", true, false, func(c *retryhttptest.ProviderConfig) { c.OutputTokens = retryhttptest.Limit{Rate: 1, Size: 100} }, `{"model":"m","max_tokens":60}`, 2, false},
	{"an outage", false, false, func(c *retryhttptest.ProviderConfig) { c.Requests = retryhttptest.PerMinute(1000) }, `{"model":"m"}`, 1, true},
	{"too large", false, true, func(c *retryhttptest.ProviderConfig) { c.Tokens = retryhttptest.Limit{Rate: 1, Size: 10} }, `{"model":"m","x":"` + pad(282) + `"}`, 1, false},
}

// TestBodyLimitsProvider: a 429 of every limit in every dialect is
// attributed to the limit the Provider's Stats say refused it.
func TestBodyLimitsProvider(t *testing.T) {
	for _, d := range retryhttptest.Dialects() {
		for _, k := range providerLimits {
			if k.anthropic && d != retryhttptest.AnthropicDialect || k.openAI && d != retryhttptest.OpenAIDialect {
				continue
			}
			t.Run(d.String()+"/"+k.name, func(t *testing.T) {
				mock := clock.NewMock()
				mock.Set(epoch)
				cfg := retryhttptest.ProviderConfig{Dialect: d, Clock: mock}
				k.cfg(&cfg)
				p := retryhttptest.NewProvider(cfg)
				if k.outage {
					p.Outage(mock.Now().Add(time.Second))
				}
				var status int
				var body string
				before := p.Stats()
				for range k.sends {
					before = p.Stats()
					status, body = providerPost(t, p, k.body)
				}
				require.Equal(t, http.StatusTooManyRequests, status, "the last call is refused")
				want := refusedBy(before, p.Stats())
				if d == retryhttptest.BareDialect {
					want = refusal{}
				} else if d != retryhttptest.OpenAIDialect {
					want.tooLarge = false // only OpenAI's body says so
				}
				hit, tooLarge := bodyLimits([]byte(body))
				assert.Equal(t, want, refusal{hit, tooLarge}, "%s", body)
			})
		}
	}
}

// refusedBy is the refusal the Provider counted between two Stats.
func refusedBy(before, after retryhttptest.ProviderStats) refusal {
	var r refusal
	for l, n := range map[store.LaneID]int64{
		store.Requests:     after.RefusedRequests - before.RefusedRequests + after.RefusedOutage - before.RefusedOutage,
		store.Tokens:       after.RefusedTokens - before.RefusedTokens,
		store.InputTokens:  after.RefusedInputTokens - before.RefusedInputTokens,
		store.OutputTokens: after.RefusedOutputTokens - before.RefusedOutputTokens,
	} {
		if n > 0 {
			r.hit |= 1 << l
		}
	}
	r.tooLarge = after.TooLarge > before.TooLarge
	return r
}

// providerPost sends body to p and returns the answer's status and body.
func providerPost(t *testing.T, p http.RoundTripper, body string) (int, string) {
	t.Helper()
	resp, err := p.RoundTrip(post(t, body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
