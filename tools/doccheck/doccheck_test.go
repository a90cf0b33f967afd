package main

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

func TestLex(t *testing.T) {
	tests := []struct {
		line string
		want []string // value and unit of each measurement
	}{
		{"adds +3.76 ns over the bare stub", []string{"3.76 ns"}},
		{"1.05–1.06 requests per success", []string{"1.05", "1.06"}},
		{"×1.004 the bare transport, × 1.019", []string{"1.004 ×", "1.019 ×"}},
		{"cooldown 1.39×, 96.4% of mutants, ±20% jitter", []string{"1.39 ×", "96.4 %", "20 %"}},
		{"2.003 s, 10 s, 40 ms, 40ms, 64 KiB, 5 minutes, 2 seconds", []string{"2.003 s", "10 s", "40 ms", "40 ms", "64 KiB", "5 min", "2 s"}},
		{"64,800 situations, 100,000 calls, 3 tries, issue 16", nil},
		{"R17, p99, HTTP/2, HTTP/1.1, x-ratelimit-2, 2026-12-02", nil},
		{"v1.77.0, go1.26.8, Go 1.25, go 1.26, pre-1.0, v0.x", nil},
		{"failsafe-go +1453 ns, failsafe-go ×1.065, mongo 1.5, Go 1.26", []string{"1453 ns", "1.065 ×", "1.5"}},
		{"a 2 × workers ÷ rate floor, 2 sends, 3 sec", nil},
		{"a digest 3f66f5a and 141c1927b8fb", nil},
		{"-5s was ignored; 1e400s too", []string{"5 s"}},
		{"its 429s and 503s, then 600s and 99s", []string{"600 s", "99 s"}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			var got []string
			for _, q := range lex(tt.line, false) {
				got = append(got, strings.TrimSpace(q.value+" "+q.unit))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("lex(%q) = %q, want %q", tt.line, got, tt.want)
			}
		})
	}
}

func TestAnchors(t *testing.T) {
	src := "# The rules\n## R17. Cooldown (a provider's word, shared)\n```sh\n# not a heading\n```\n" +
		"### Goodput under a provider's rate limit (issue 16)\n## `Budget.Err`: SDKs\n## Twice\n## Twice\n#nospace\n"
	got := anchors(src)
	for _, want := range []string{"the-rules", "r17-cooldown-a-providers-word-shared",
		"goodput-under-a-providers-rate-limit-issue-16", "budgeterr-sdks", "twice", "twice-1"} {
		if !got[want] {
			t.Errorf("anchors: no %q in %v", want, got)
		}
	}
	if got["not-a-heading"] || got["nospace"] || len(got) != 6 {
		t.Errorf("anchors = %v, want the 6 headings only", got)
	}
}

// repoFS is a small repository: what its documents cite is varied per case.
func repoFS(files map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{
		"README.md":             {Data: []byte("# retryhttp\n")},
		"RULES.md":              {Data: []byte("# Rules\n## R1. Drop-in\n")},
		"CHANGELOG.md":          {Data: []byte("# Changelog\n")},
		"cooldown_test.go":      {Data: []byte("package retryhttp\n\nfunc TestCooldownSeedRule(t *testing.T) {}\nfunc ExampleNewCooldown() {}\n")},
		"examples/x/x_test.go":  {Data: []byte("package main\n\nfunc TestStackedRetries(t *testing.T) {}\n")},
		"testdata/y_test.go":    {Data: []byte("func TestInTestdata(t *testing.T) {}\n")},
		"bench/RESULTS.md":      {Data: []byte("| retryhttp | +3.76 | 1.004 (1.000–1.018) | 2.003 s | 64 | +574 | 156 010 | 7 ms |\n")},
		"retryhttptest/doc.go":  {Data: []byte("// Package k: see RULES.md.\n//\n//\tfunc TestSummarize(t *testing.T) {\n//\tcd bench && ./goodput.sh\npackage k\n")},
		"docs/empty/.gitkeep":   {Data: nil},
		"tools/doccheck/doc.md": {Data: []byte("not a document: only docs/*.md are\n 9.99 ms\n")},
	}
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	return fsys
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string // each problem holds this text, in order
	}{
		{"all true", map[string]string{
			"README.md": "# retryhttp\nSee `cooldown_test.go` (`TestCooldownSeedRule`, ExampleNewCooldown), examples/x/x_test.go's TestStackedRetries,\n" +
				"[the rules](RULES.md#r1-drop-in), [docs](docs/a.md), [home](#retryhttp), [dir](docs/empty/).\n" +
				"+3.76 ns, ×1.004, 2.003 s, +574 ns, 156010 B, 64 KiB, `Retry-After: 20`, `1.5`, Go 1.26.\n" +
				"```go\nfunc TestOwn(t *testing.T) { TestOwn(t) } // 7.77 ms\n```\n",
			"docs/a.md":    "[up](../README.md), [SDK](https://github.com/o/sdk/blob/v1/internal/requestconfig.go) [`common.go`](https://x.test/common.go)\n",
			"CHANGELOG.md": "# Changelog\n0.77 s in a changelog is not checked; TestCooldownSeedRule is.\n",
		}, nil},
		{"a test that does not exist", map[string]string{
			"README.md": "`TestCooldownOneProbeFirst` and TestInTestdata\n",
			"RULES.md":  "# Rules\n## R1. Drop-in\nFuzzNothing, BenchmarkNone/sub\n",
		}, []string{"README.md:1: TestCooldownOneProbeFirst", "README.md:1: TestInTestdata", "RULES.md:3: FuzzNothing", "RULES.md:3: BenchmarkNone"}},
		{"a file that does not exist", map[string]string{
			"README.md": "cooldown_hostile_test.go, `bench/goodput.sh`, [x](docs/missing.md)\n```sh\ncd bench && ./goodput.sh\n```\n",
		}, []string{"README.md:1: cooldown_hostile_test.go", "README.md:1: bench/goodput.sh", "README.md:1: docs/missing.md"}},
		{"an anchor that does not exist", map[string]string{
			"README.md": "[the Cooldown](RULES.md#r17-cooldown), [here](#nowhere)\n",
		}, []string{"RULES.md#r17-cooldown: no heading", "#nowhere: no heading"}},
		{"a number that was not measured", map[string]string{
			"README.md": "adds 4.1 ns, ×1.20, 96.4%, 3 s, 7 s\n",
			"docs/a.md": "\n\nwithin 1.28 s, 40 ms\n",
		}, []string{"README.md:1: 4.1 ns", "README.md:1: ×1.20", "README.md:1: 96.4%", "README.md:1: 3 s", "README.md:1: 7 s", "docs/a.md:3: 1.28 s", "docs/a.md:3: 40 ms"}},
		{"a rule range, a rule and a level that are not the code's", map[string]string{
			"RULES.md":     "# Rules\n## R1. Drop-in\n## R2. What is retried\n",
			"observe.go":   goFile("const msgRetrying = \"llm transient failure — retrying\"\n\nfunc f(l *zap.Logger) { l.Warn(msgRetrying) }\n"),
			"README.md":    "# retryhttp\nThe rules R1 to R1, and R3.\nEach retry is one Info entry `llm transient failure — retrying`.\n",
			"CHANGELOG.md": "# Changelog\nThe rules R1 to R1 were; R3; an Info `llm transient failure — retrying`.\n",
		}, []string{"README.md:2: R1 to R1: RULES.md's rules run R1 to R2", "README.md:2: R3: no rule of RULES.md", `README.md:3: "llm transient failure — retrying" is stated as Info; the code writes it at Warn (observe.go:13)`}},
		{"RULES.md with no rule", map[string]string{"RULES.md": "# Rules\n"}, []string{"RULES.md: no rule heading"}},
		{"a msg constant no call writes", map[string]string{"x.go": goFile("const msgX = \"x\"\n")}, []string{`x.go:11:7: msgX ("x"): no logging call writes it`}},
		{"an exemption no document uses", nil, []string{`exemption "64 KiB"`}},
	}
	exempt := []exemption{{"64 KiB", "a limit"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := check(repoFS(tt.files), exempt)
			if err != nil {
				t.Fatal(err)
			}
			if tt.name != "all true" && tt.name != "an exemption no document uses" {
				got = slices.DeleteFunc(got, func(p string) bool { return strings.Contains(p, "exemption") })
			}
			if len(got) != len(tt.want) {
				t.Fatalf("check = %q, want %d problems like %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to hold %q", i, got[i], w)
				}
			}
		})
	}
}

func TestCheckNeedsTheDocuments(t *testing.T) {
	fsys := repoFS(nil)
	delete(fsys, "CHANGELOG.md")
	if _, err := check(fsys, nil); err == nil {
		t.Error("check without CHANGELOG.md: no error")
	}
	fsys = repoFS(nil)
	delete(fsys, "bench/RESULTS.md")
	if _, err := check(fsys, nil); err == nil {
		t.Error("check without bench/RESULTS.md: no error")
	}
}
