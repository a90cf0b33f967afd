package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeRepo writes a repository whose documents are files, in a temp
// directory, with a go.work that uses this repository's root module: its
// snippets compile against the real retryhttp.
func fakeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	real, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files["go.work"] = "go 1.26.0\n\nuse " + real + "\n"
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const fence = "```"

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		doc  string // the document's path
		src  string
		want []string // each snippet's line holds this, in order
	}{
		{"a compiling fragment", "README.md", "# x\n\n" + fence + "go\n" +
			"client := &http.Client{Transport: retryhttp.New(http.DefaultTransport, retryhttp.WithLogger(log))}\n" +
			"ctx = retryhttp.WithBudget(ctx, retryhttp.NewBudget(retryhttp.PublicTierMaxWait)) // public tier only\n" +
			"resp, err := client.Do(req.WithContext(ctx))\n" + fence + "\n",
			[]string{"README.md:3: ok"}},
		{"a failing fragment, at its line", "docs/fail.md", "# x\n\ntext\n\n" + fence + "go\n" +
			"cd := retryhttp.NewCooldown(nil)\n" +
			"store := retryhttp.NewLocalStore()\n" + fence + "\n",
			[]string{"docs/fail.md:5: FAIL: docs/fail.md:7:20: undefined: retryhttp.NewLocalStore"}},
		{"a syntax error, at its line", "docs/syntax.md", fence + "go\nx := 1\ny := \n" + fence + "\n",
			[]string{"docs/syntax.md:1: FAIL: " + "docs/syntax.md:4:2: expected operand, found '}'"}},
		{"a fragment that returns", "docs/returns.md", fence + "go\nvar busy *retryhttp.Error\n" +
			"if errors.As(retryhttp.NewBudget(time.Second).Err(), &busy) {\n\treturn fmt.Errorf(\"busy, try again in %v\", busy.RetryAfter)\n}\nreturn nil\n" + fence + "\n",
			[]string{"docs/returns.md:1: ok"}},
		{"a whole file", "docs/file.md", "```sh\ngo run .\n```\n\n" + fence + "go\npackage main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hi\") }\n" + fence + "\n" +
			fence + "go\n// Package p does not compile.\npackage p\n\nvar x int = \"no\"\n" + fence + "\n",
			[]string{"docs/file.md:5: ok", "docs/file.md:12: FAIL: docs/file.md:16:13: cannot use \"no\""}},
		{"the no-compile marker", "docs/marked.md", "<!-- snippet: no-compile -->\n\n" + fence + "go\nfor each try: wait, send\n" + fence + "\n" +
			fence + "text\nnot go either\n" + fence + "\n",
			[]string{"docs/marked.md:3: not compiled (<!-- snippet: no-compile -->)"}},
		{"an excerpt of a test", "docs/excerpt.md", "<!-- snippet: from TestRow -->\n" + fence + "go\nclk := retryhttptest.NewClock()  // the kit's\n\n" +
			"got, err := Summarize(t.Context(), client, \"a long text\")\n" + fence + "\n" +
			"<!-- snippet: from TestRow -->\n" + fence + "go\ngot, err := Summarize(t.Context(), client, \"a long text\")\nclk := retryhttptest.NewClock()\n" + fence + "\n" +
			"<!-- snippet: from TestNone -->\n" + fence + "go\nx := 1\n" + fence + "\n",
			[]string{"docs/excerpt.md:2: ok: an excerpt of TestRow (a/a_test.go)",
				"docs/excerpt.md:8: FAIL: docs/excerpt.md:10: not a line of TestRow (a/a_test.go) after the lines above it: clk := retryhttptest.NewClock()",
				"docs/excerpt.md:13: FAIL: no _test.go file declares func TestNone"}},
		{"an example's names", "examples/x/README.md", fence + "go\nfmt.Println(helper(key))\n" + fence + "\n",
			[]string{"examples/x/README.md:1: ok"}},
	}
	files := map[string]string{
		"README.md":            "# nothing here\n",
		"a/a_test.go":          "package a\n\nfunc TestRow(t *testing.T) {\n\tclk := retryhttptest.NewClock()\n\tclient := x\n\tgot, err := Summarize(t.Context(), client, \"a long text\") // a comment\n}\n",
		"examples/x/main.go":   "package main\n\nfunc helper(s string) string { return s }\n\nfunc main() {}\n",
		"examples/x/x_test.go": "package main\n\nthis file is not copied\n",
		"examples/x/go.mod":    "module example.com/x\n",
	}
	for _, tt := range tests {
		files[tt.doc] = tt.src
	}
	root := fakeRepo(t, files)
	r, err := check(root, os.DirFS(root), false)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	r.print(&out, 0)
	lines := strings.Split(out.String(), "\n")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, l := range lines {
				if strings.HasPrefix(l, tt.doc+":") {
					got = append(got, l)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("lines of %s = %q, want %d like %q", tt.doc, got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("line %d = %q, want it to hold %q", i, got[i], w)
				}
			}
		})
	}
	if len(r.problems) > 0 {
		t.Errorf("problems about no snippet: %q", r.problems)
	}
}

func TestBlocksRefuses(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"a marker above prose", "<!-- snippet: no-compile -->\ntext\n", "x.md:1: <!-- snippet: no-compile -->: a snippet marker must be"},
		{"a marker above a sh block", "<!-- snippet: no-compile -->\n```sh\nls\n```\n", "x.md:1:"},
		{"a marker at the end", "text\n<!-- snippet: from TestX -->\n", "x.md:2:"},
		{"a misspelt marker", "<!-- snippet: nocompile -->\n```go\nx\n```\n", "x.md:1:"},
		{"a block never closed", "```go\nx := 1\n", "x.md:1: a code block that is never closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := blocks("x.md", tt.src)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("blocks: %v, want an error holding %q", err, tt.want)
			}
		})
	}
}

func TestUnusedPrelude(t *testing.T) {
	got := unusedPrelude(prelude[1:])
	if len(got) != 1 || !strings.Contains(got[0], "prelude: ctx context.Context: no snippet uses it") {
		t.Errorf("unusedPrelude(all but ctx) = %q", got)
	}
	if got := unusedPrelude(prelude); got != nil {
		t.Errorf("unusedPrelude(all) = %q", got)
	}
}

// A cold module cache makes go vet say what it downloads: that is no
// snippet's failure, and no problem.
func TestAttributeSkipsDownloads(t *testing.T) {
	b := &build{tmp: "/tmp/x", hosts: map[string]host{}}
	out := "go: downloading golang.org/x/net v0.61.0\ngo: downloading google.golang.org/grpc v1.67.1\n"
	by, other := b.attribute([]byte(out))
	if len(by) != 0 || len(other) != 0 {
		t.Errorf("attribute(downloads) = %v, %v; want nothing", by, other)
	}
}
