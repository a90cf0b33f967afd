package main

// The markdown the command prints: a header of the parameters and the
// machine, then a table per fault.

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

// table is one fault's rows, in both dialects.
type table struct {
	fault bench.StreamFault
	share float64
	rows  []result
}

type result struct {
	row    bench.StreamsRow
	report bench.StreamsReport
}

func write(w io.Writer, cfg bench.StreamsConfig, shares map[bench.StreamFault]float64, cmd string, started time.Time, total time.Duration, m *bench.Machine, loadEnd string, tables []table) {
	fmt.Fprintf(w, "## Streams (issue 38)\n\n")
	m.WriteHead(w, started, loadEnd)
	fmt.Fprintf(w, "| provider | an httptest server on 127.0.0.1 that answers every POST 200 `text/event-stream` at once, its opening event at once, the first token %s after the request, then a token every %s, %d in all, then its closing events; in Anthropic's words (`message_start`, `content_block_delta`, `message_stop`) or OpenAI's (chat.completion.chunk, `[DONE]`). Faults, drawn per request at random (seed %d): *overloaded*, %.0f%% of the streams send their opening event then an overloaded error event (Anthropic `event: error` `overloaded_error`; OpenAI `{\"error\":{\"code\":\"server_is_overloaded\"}}`) and end; *stall*, %.0f%% stall %s before their first token; a fresh provider per row |\n",
		secs(cfg.TTFT), secs(cfg.TokenEvery), cfg.Tokens, cfg.Seed, 100*shares[bench.FaultOverloaded], 100*shares[bench.FaultStall], secs(cfg.Stall))
	fmt.Fprintf(w, "| calls | %d workers make %d calls in all, one after another, each a streamed POST with a %s context deadline, its stream read as it comes; *completed* iff the caller read the whole answer (every token and the stream's end) with no error |\n",
		cfg.Workers, cfg.Calls, secs(cfg.Timeout))
	fmt.Fprintf(w, "| clients | each row over its own base transport (net/http's default, no proxy); retryhttp's rows with its defaults (2 retries, 400 ms doubling, ±20%%) but where named, `WithStreamRetry(%s)` where named; the SDK of the dialect (anthropic-sdk-go v2.15.0, openai-go v3.98.0) with its own retries (2) and no retryhttp; go-retryablehttp and failsafe-go as bench/libs.go sets them up (2 retries, 400 ms doubling) |\n", secs(cfg.FirstToken))
	fmt.Fprintf(w, "| command | `%s` (from bench/), %s in all |\n", cmd, secs(total.Round(time.Second)))
	for _, t := range tables {
		writeTable(w, t)
	}
	fmt.Fprintf(w, "\n*completed*: calls whose caller read the whole answer, of %d. *time to first token*: from `Do` (or the SDK's call) to the first token in the caller's hands, of the calls that got one. *requests per completed call*: requests the provider got over the calls completed. *targets met*: the row's targets (issue 38) it met, or those it missed (*over bare*: the median time to first token more than 1 ms over the bare row's); — is a row with none.\n", cfg.Calls)
}

func writeTable(w io.Writer, t table) {
	title := map[bench.StreamFault]string{bench.NoFault: "No faults", bench.FaultOverloaded: fmt.Sprintf("%.0f%% of streams overloaded after their opening event", 100*t.share),
		bench.FaultStall: fmt.Sprintf("%.0f%% of streams stalled before their first token", 100*t.share)}[t.fault]
	fmt.Fprintf(w, "\n### %s\n\n", title)
	fmt.Fprintf(w, "| client | dialect | completed | time to first token p50 | p99 | requests per completed call | targets met |\n")
	fmt.Fprintf(w, "|---|---|--:|--:|--:|--:|---|\n")
	bare := map[bench.StreamDialect]bench.StreamsReport{}
	for _, r := range t.rows {
		if r.row.Name == "bare (net/http)" {
			bare[r.report.Config.Dialect] = r.report
		}
	}
	var errs []string
	for _, r := range t.rows {
		rep := r.report
		fmt.Fprintf(w, "| %s | %s | %.3f | %s | %s | %.3f | %s |\n", r.row.Name, rep.Config.Dialect, rep.Share(),
			ms(rep.TTFT(0.5)), ms(rep.TTFT(0.99)), rep.PerCompleted(), met(r, bare[rep.Config.Dialect]))
		if rep.FirstErr != "" {
			errs = append(errs, fmt.Sprintf("- %s, %s: `%s`", r.row.Name, rep.Config.Dialect, cut(rep.FirstErr, 160)))
		}
	}
	fmt.Fprintf(w, "\nTargets (issue 38): %s\n", targetsText[t.fault])
	if len(errs) > 0 {
		fmt.Fprintf(w, "\nAn error each row's calls ended with, when any did:\n\n%s\n", strings.Join(errs, "\n"))
	}
}

// targetsText says in words what bench.StreamsRows' targets are, per fault.
var targetsText = map[bench.StreamFault]string{
	bench.NoFault: "retryhttp's rows 1.000 completed, 1.000 requests per completed call, a median time to first token within 1 ms of the bare row's.",
	bench.FaultOverloaded: "retryhttp + WithStreamRetry (3 tries) at least 0.97 completed (3 tries carry 1 − 0.3³ = 0.973 at most) at 1.5 requests per completed call at most; " +
		"with WithMaxRetries(4) at least 0.995; the others measured (about 0.70 expected: none retries a 200).",
	bench.FaultStall: "retryhttp + WithStreamRetry at least 0.99 completed, a p99 time to first token of 3 s at most, 1.2 requests per completed call at most; " +
		"the others measured (a p99 past the stall expected).",
}

// met says whether r met its row's targets, naming those it missed.
func met(r result, bare bench.StreamsReport) string {
	if r.row.Targets == nil {
		return "—"
	}
	t := r.row.Targets(r.report.Config)
	if t == (bench.StreamsTargets{}) {
		return "—"
	}
	if missed := t.Missed(r.report, bare); len(missed) > 0 {
		return "missed: " + strings.Join(missed, ", ")
	}
	return "met"
}

// ms writes d in milliseconds, to 0.1 ms below a second, else in seconds.
func ms(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// secs writes a duration set, not measured, as Go does: 30s, 200ms, 1m0s.
func secs(d time.Duration) string { return d.String() }

// cut is s cut to n bytes at most, "…" marking a cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
