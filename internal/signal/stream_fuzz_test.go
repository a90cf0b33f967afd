package signal

import (
	"bytes"
	"cmp"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzStream: whatever the bytes and however they are cut, a Stream never
// panics and says what it says of them fed whole: the verdict is the
// bytes', not the reads'. Its At is within the bytes (and the cap), and
// the bytes up to At alone give it; an error's Type is a short machine
// string and its Status an HTTP error status or 0; nothing but an error
// has either. And an SSE body says what fzVerdict, a reader that splits
// the lines first, says. `go test -run '^$' -fuzz '^FuzzStream$' -fuzztime 60s`
// searches for more; what it finds is kept under testdata/fuzz/FuzzStream.
func FuzzStream(f *testing.F) {
	for _, tt := range streamCases {
		for _, variant := range streamVariants {
			f.Add([]byte(variant.bom+variant.eol(tt.body)), []byte{7, 1, 200, 3})
		}
	}
	for _, seed := range []string{
		"\xef\xbb", "\xef\xbb\xbf{", "\r\r\n\n\r", "data:\rdata:\r\r", ":\xff\n\n", "event:error\ndata:\n\n",
		"event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"error\":{}}}\n\n",
		"data: {\"error\":{\"code\":1e999}}\n\n", "data: {\"choices\":[{\"delta\":{\"content\":\"\\\"}}]}\n\n",
		"{\"a\":\"}\\\"{\"}", "[DONE]", "data: [DONE]\r\n\r\n",
	} {
		f.Add([]byte(seed), []byte{1})
	}
	f.Fuzz(func(t *testing.T, body, sizes []byte) {
		want := feedSplit(body, nil)
		requireVerdict(t, body, want)
		var cuts []int // a read of 1 + sizes[i] bytes, sizes over and over
		for i, c := 0, 0; c < len(body); i++ {
			cuts = append(cuts, c)
			c++
			if len(sizes) > 0 {
				c += int(sizes[i%len(sizes)])
			}
		}
		require.Equal(t, flatVerdict(want), flatVerdict(feedSplit(body, cuts)), "%q cut at %v", body, cuts)
		if len(body) <= 4<<10 {
			require.Equal(t, flatVerdict(want), flatVerdict(feedSplit(body, bytewise(len(body)))), "%q byte by byte", body)
		}
		require.Equal(t, flatVerdict(want), flatVerdict(feedSplit(body[:want.At], nil)), "%q: the bytes up to At alone", body)
		if len(body) < MaxStreamAhead && !bytes.HasPrefix(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")), []byte("{")) {
			require.Equal(t, flatVerdict(want), flatVerdict(fzVerdict(body)), "%q: what a reader of split lines says", body)
		}
	})
}

// fzVerdict is a Stream's verdict on an SSE body shorter than the cap, read
// the plain way: its lines split first (fzLines), then walked.
func fzVerdict(body []byte) StreamVerdict {
	lines, ends := fzLines(body)
	var name, data []byte
	dataLines, dialect := 0, ""
	verdict := func(kind StreamKind, at int, d string) StreamVerdict {
		return StreamVerdict{Kind: kind, At: at, Dialect: cmp.Or(d, dialect, DialectSSE)}
	}
	for i, line := range lines {
		field, value, colon := bytes.Cut(line, []byte(":"))
		if colon && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch {
		case len(line) == 0 && dataLines > 0:
			class, d := eventOf(name, data)
			switch class {
			case classToken, classUndecided:
				return verdict(StreamToken, ends[i], d)
			case classDone:
				return verdict(StreamEnded, ends[i], d)
			case classError:
				e, ok := readError(data)
				if !ok && string(name) == "error" {
					e, ok = StreamVerdict{Type: "error", Payload: data}, true
				}
				if ok {
					v := verdict(StreamError, ends[i], e.Dialect)
					v.Type, v.Status, v.Payload = e.Type, e.Status, e.Payload
					return v
				}
			case classOpening:
				dialect = cmp.Or(d, dialect)
			}
			fallthrough
		case len(line) == 0:
			name, data, dataLines = nil, nil, 0
		case line[0] == ':':
		case string(field) == "event":
			name = value
			if class, d := nameClass(name); class == classToken {
				return verdict(StreamToken, ends[i], d)
			}
		case string(field) == "data" && dataLines == 0:
			dataLines, data = 1, value
			if class, d := eventOf(name, data); class == classToken {
				return verdict(StreamToken, ends[i], d)
			}
		case string(field) == "data":
			dataLines++
			data = append(append(bytes.Clone(data), '\n'), value...)
		}
	}
	return verdict(StreamEnded, len(body), "")
}

// fzLines splits body into its SSE lines, after a BOM, each with the
// offset just past its end (its \r of a \r\n); the last line, unended, is
// dropped.
func fzLines(body []byte) (lines [][]byte, ends []int) {
	start := 0
	if bytes.HasPrefix(body, []byte("\xef\xbb\xbf")) {
		start = 3
	}
	for i := start; i < len(body); i++ {
		switch body[i] {
		case '\r':
			lines, ends = append(lines, body[start:i]), append(ends, i+1)
			if i+1 < len(body) && body[i+1] == '\n' {
				i++
			}
			start = i + 1
		case '\n':
			lines, ends = append(lines, body[start:i]), append(ends, i+1)
			start = i + 1
		}
	}
	return lines, ends
}

// requireVerdict requires what any verdict of body holds.
func requireVerdict(t *testing.T, body []byte, v StreamVerdict) {
	t.Helper()
	seen := min(len(body), MaxStreamAhead)
	require.Contains(t, []StreamKind{StreamToken, StreamError, StreamEnded, StreamCapped}, v.Kind, "%q: decided at End", body)
	require.Contains(t, []string{DialectAnthropic, DialectChat, DialectResponses, DialectGemini, DialectSSE}, v.Dialect, "%q: a dialect", body)
	require.True(t, v.At >= 0 && v.At <= seen, "%q: At %d within the %d bytes seen", body, v.At, seen)
	switch v.Kind {
	case StreamToken, StreamError:
		require.Positive(t, v.At, "%q: a token or an error rests on bytes", body)
	case StreamCapped:
		require.Equal(t, MaxStreamAhead, v.At, "%q: capped at the cap", body)
	}
	if v.Kind != StreamError {
		require.Equal(t, StreamVerdict{Kind: v.Kind, At: v.At, Dialect: v.Dialect}, v, "%q: only an error has a type, a status, a payload", body)
		return
	}
	require.NotEmpty(t, v.Type, "%q: an error's type", body)
	require.LessOrEqual(t, len(v.Type), 64, "%q: an error's type is short", body)
	require.Equal(t, v.Type, machineString([]byte(`"`+v.Type+`"`)), "%q: an error's type is a machine string", body)
	require.True(t, v.Status == 0 || v.Status >= 400 && v.Status <= 599, "%q: status %d", body, v.Status)
	require.LessOrEqual(t, len(v.Payload), v.At+len(`{"error":}`), "%q: the payload is the error's bytes", body)
	ErrorBody(v.Payload) // never panics
}
