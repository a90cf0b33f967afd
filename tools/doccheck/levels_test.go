package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// goFile is a file of package p with imports enough for every case.
func goFile(body string) string {
	return "package p\n\nimport (\n\t\"context\"\n\t\"log/slog\"\n\n\t\"go.uber.org/zap\"\n\t\"go.uber.org/zap/zapcore\"\n)\n\n" + body
}

// codeLevelsCases are TestCodeLevels' rows: Go files, the levels of their
// messages, and the msg constants written at none.
var codeLevelsCases = []struct {
	name  string
	files map[string]string
	want  map[string]string // a message and its levels, comma-separated
	probs []string          // each unwritten problem holds this, in order
}{
	{"zap's level methods", map[string]string{"a.go": goFile(
		"const msgA = \"a — warned\"\n\nfunc f(l *zap.Logger) { l.Warn(msgA); l.Info(\"a literal\"); l.Sugar().Debugw(\"sugared\") }\n")},
		map[string]string{"a — warned": "Warn", "a literal": "Info", "sugared": "Debug"}, nil},
	{"Check, with a level a variable holds", map[string]string{"a.go": goFile(
		"const msgHolding = \"held\"\n\nfunc f(l *zap.Logger, hold bool) {\n\tlevel := zap.DebugLevel\n\tif hold {\n\t\tlevel = zap.InfoLevel\n\t}\n" +
			"\tif ce := l.Check(level, msgHolding); ce != nil {\n\t\tce.Write()\n\t}\n\tl.Check(zapcore.ErrorLevel, \"checked\")\n}\n")},
		map[string]string{"held": "Debug,Info", "checked": "Error"}, nil},
	{"slog", map[string]string{"a.go": goFile(
		"func f(ctx context.Context, l *slog.Logger) {\n\tl.Log(ctx, slog.LevelWarn, \"logged\")\n\tl.InfoContext(ctx, \"in context\")\n\tl.LogAttrs(ctx, slog.LevelDebug, \"attrs\")\n}\n" +
			"func g(l *zap.Logger) { l.Log(zap.ErrorLevel, \"zap's Log\") }\n")},
		map[string]string{"logged": "Warn", "in context": "Info", "attrs": "Debug", "zap's Log": "Error"}, nil},
	{"a constant made of constants, another file's", map[string]string{
		"a.go": goFile("const prefix = \"retryhttp: \"\n\nconst msgStore = prefix + \"Store failing\"\n"),
		"b.go": goFile("func f(l *zap.Logger) { l.Warn(msgStore) }\n")},
		map[string]string{"retryhttp: Store failing": "Warn"}, nil},
	{"helpers, a chain of them", map[string]string{"r/a.go": goFile(
		"type logger struct{ z *zap.Logger; s *slog.Logger }\n\n" +
			"func (l logger) warn(msg string, kv ...any) { l.warnContext(context.Background(), msg, kv...) }\n\n" +
			"func (l logger) warnContext(ctx context.Context, msg string, kv ...any) {\n\tl.z.Warn(msg)\n\tl.s.Log(ctx, slog.LevelWarn, msg)\n}\n\n" +
			"func logAt(l *zap.Logger, lvl zapcore.Level, msg string) { l.Check(lvl, msg) }\n\n" +
			"func f(l logger, z *zap.Logger) {\n\tl.warn(\"via a helper\", \"k\", 1)\n\tlogAt(z, zap.InfoLevel, msgAt)\n}\n\nconst msgAt = \"at a level given\"\n")},
		map[string]string{"via a helper": "Warn", "at a level given": "Info"}, nil},
	{"a level parameter in slog's terms", map[string]string{"r/a.go": goFile(
		"type logger struct{ z *zap.Logger; s *slog.Logger }\n\n" +
			"func (l logger) log(ctx context.Context, level zapcore.Level, msg string) {\n\tl.z.Log(level, msg)\n" +
			"\tsl := slog.LevelWarn\n\tif level == zapcore.InfoLevel {\n\t\tsl = slog.LevelInfo\n\t}\n\tl.s.Log(ctx, sl, msg)\n}\n\n" +
			"func (l logger) info(msg string) { l.log(context.Background(), zapcore.InfoLevel, msg) }\n\n" +
			"func f(l logger) { l.info(\"back\"); l.log(nil, zap.WarnLevel, \"failing\") }\n")},
		map[string]string{"back": "Info", "failing": "Warn"}, nil},
	{"what is not a logging call", map[string]string{"a.go": goFile(
		"func f(t interface{ Error(...any) }, err error, l *zap.Logger, lvl zapcore.Level, msg string) {\n" +
			"\tt.Error(err)\n\t_ = err.Error()\n\tl.Warn(msg)\n\tl.Check(lvl, \"a level unknown\")\n\tl.Check(2, \"not a level\")\n}\n")},
		map[string]string{}, nil},
	{"tests, testdata and tools are not the library", map[string]string{
		"a_test.go":         goFile("func f(l *zap.Logger) { l.Error(\"in a test\") }\n"),
		"testdata/a.go":     goFile("func f(l *zap.Logger) { l.Error(\"in testdata\") }\n"),
		"tools/x/a.go":      goFile("func f(l *zap.Logger) { l.Error(\"in tools\") }\n"),
		"examples/x/a.go":   goFile("func f(l *zap.Logger) { l.Error(\"in an example\") }\n"),
		"retryredis/a.go":   goFile("func f(l *zap.Logger) { l.Error(\"in retryredis\") }\n"),
		"internal/x/doc.go": "// Package x.\npackage x\n"},
		map[string]string{"in retryredis": "Error"}, nil},
	{"a msg constant written at no level read", map[string]string{"a.go": goFile(
		"const (\n\tmsgLost = \"lost\"\n\tmsgWarned = \"warned\"\n\tmessage = \"not a msg constant\"\n)\n\n" +
			"func f(l *zap.Logger, lvl zapcore.Level) { l.Check(lvl, msgLost); l.Warn(msgWarned) }\n")},
		map[string]string{"warned": "Warn"}, []string{`a.go:12:2: msgLost ("lost"): no logging call writes it`}},
}

func TestCodeLevels(t *testing.T) {
	for _, tt := range codeLevelsCases {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for name, src := range tt.files {
				fsys[name] = &fstest.MapFile{Data: []byte(src)}
			}
			var paths []string
			for _, p := range slices.Sorted(maps.Keys(tt.files)) {
				if librarySource(p) {
					paths = append(paths, p)
				}
			}
			found, probs, err := codeLevels(fsys, paths)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for msg, levels := range found {
				got[msg] = strings.Join(slices.Sorted(maps.Keys(levels)), ",")
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("levels = %v, want %v", got, tt.want)
			}
			if len(probs) != len(tt.probs) {
				t.Fatalf("problems = %q, want %d like %q", probs, len(tt.probs), tt.probs)
			}
			for i, w := range tt.probs {
				if !strings.Contains(probs[i], w) {
					t.Errorf("problem %d = %q, want it to hold %q", i, probs[i], w)
				}
			}
		})
	}
}

func TestCheckLevels(t *testing.T) {
	const (
		retrying = "llm transient failure — retrying"
		holding  = "llm rate limit — waiting for cooldown"
		open     = "llm provider down — circuit open"
		closed   = "llm provider back — circuit closed"
		failing  = "retryredis: Redis is failing; each process paces on its own until it is back"
		back     = "retryredis: Redis is back; the processes pace together again"
	)
	w := levelsOf{
		retrying: {"Warn": "observe.go:195"}, holding: {"Debug": "observe.go:116", "Info": "observe.go:116"},
		open: {"Warn": "circuit.go:171"}, closed: {"Info": "circuit.go:178"},
		failing: {"Warn": "retryredis/store.go:204"}, back: {"Warn": "retryredis/store.go:207"},
	}
	tests := []struct {
		name, path, src string
		want            []string // each problem holds this, in order
	}{
		{"as the code writes them", "RULES.md", "Before every wait the logger gets a Warn entry\n`" + retrying + "` with the fields `attempt`.\n\n" +
			"- Each hold writes an Info entry, and each slot wait a Debug one, `llm rate limit — waiting\n  for cooldown`, with `wait_ms`.\n" +
			"- One Warn entry `" + open + "` when it opens (`key`) and one Info entry `" + closed + "` when it closes.\n", nil},
		{"a level the code does not write", "docs/cooldown.md", "A hold or a slot is a wait.\nEach hold, and each slot wait of a second or more, is a Warn entry `llm rate limit —\nwaiting for cooldown`, and the next `Attempt` reports it.\n",
			[]string{`docs/cooldown.md:2: "llm rate limit — waiting for cooldown" is stated as Warn; the code writes it at Debug (observe.go:116), Info (observe.go:116)`}},
		{"each clause its own", "docs/outage.md", "One Warn entry when a key opens (`" + open + "`) and one Info when it closes; `" + closed + "` is Warn.\n",
			[]string{`"` + closed + `" is stated as Warn`}},
		{"what is no statement", "docs/a.md", "`" + holding + "` is Info or Debug, never Warn, no longer Warn (`slog.LevelWarn`, [*Error], Error.Reason).\n", nil},
		{"a table row, by order", "docs/fleet.md", "| who | what | level |\n| --- | --- | --- |\n" +
			"| Cooldown | `" + open + "`, `" + closed + "` | Warn, Info |\n| Cooldown | `" + open + "`, `" + closed + "` | Info, Warn |\n",
			[]string{`docs/fleet.md:4: "` + open + `" is stated as Info`, `docs/fleet.md:4: "` + closed + `" is stated as Warn`}},
		{"a table row, every level of every message", "docs/fleet.md", "| Store | `retryredis: Redis is failing; …`, `retryredis: Redis is back; …` | Warn |\n" +
			"| Transport | `" + holding + "` | Info for the ask, Debug for a slot, Warn |\n",
			[]string{`docs/fleet.md:2: "` + holding + `" is stated as Warn`}},
		{"a log line in a code block", "README.md", "```text\nWARN  " + retrying + "  {\"attempt\": 2, \"error\": \"EOF\"}\nINFO  " + retrying + "\n" +
			`{"level":"info","msg":"` + open + `"}` + "\nlevel=WARN msg=\"" + open + "\"\n```\n",
			[]string{`README.md:3: "` + retrying + `" is stated as Info`, `README.md:4: "` + open + `" is stated as Info`}},
		{"a Go doc", "doc.go", "// Package p.\n//\n// The Cooldown writes an Info entry\n// \"" + retrying + "\".\n//\n//\tINFO " + open + "\npackage p\n",
			[]string{`doc.go:4: "` + retrying + `" is stated as Info`, `doc.go:6: "` + open + `" is stated as Info`}},
		{"the changelog is history", changelogPath, "a hold was Warn: `" + holding + "`\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := doc{path: tt.path, lines: strings.Split(tt.src, "\n"), markdown: strings.HasSuffix(tt.path, ".md")}
			got := w.check(d)
			if len(got) != len(tt.want) {
				t.Fatalf("check = %q, want %d problems like %q", got, len(tt.want), tt.want)
			}
			for i, want := range tt.want {
				if !strings.Contains(got[i], want) {
					t.Errorf("problem %d = %q, want it to hold %q", i, got[i], want)
				}
			}
		})
	}
}
