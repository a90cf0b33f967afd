package retryhttp

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/retryhttp/retryhttp/internal/signal"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/require"
)

// FuzzStreamRetry: whatever the bytes of a 200 event stream and however
// the reads cut them, the read ahead (R26) never panics, and the caller
// reads exactly the bytes of the try handed over: the stream itself when a
// token, its end, 64 KiB or a Permanent error came first (one try), or the
// retry's healthy stream after an error event that is retried, as the
// stream reader's verdict on the whole bytes says. `go test -run '^$'
// -fuzz '^FuzzStreamRetry$' -fuzztime 60000x` searches for more.
func FuzzStreamRetry(f *testing.F) {
	for _, d := range dialects {
		f.Add([]byte(d.whole()), []byte{5, 1, 255})
		for _, fail := range d.failures {
			f.Add([]byte(fail.opening(d)+fail.event), []byte{0})
			f.Add([]byte(fail.opening(d)+fail.event+d.rest), []byte{3, 200})
		}
	}
	for _, seed := range []string{"", ":\n\n", "data:\r\r", "{", "event: error\ndata: x\n\n", "\xef\xbb\xbf{\"error\":{}}"} {
		f.Add([]byte(seed), []byte{1})
	}
	healthy := dialects[0].whole()
	f.Fuzz(func(t *testing.T, body, sizes []byte) {
		var chunks []retryhttptest.Chunk
		for i, c := 0, 0; c < len(body); i++ {
			n := 1
			if len(sizes) > 0 {
				n += int(sizes[i%len(sizes)])
			}
			n = min(n, len(body)-c)
			chunks = append(chunks, retryhttptest.Chunk{Data: string(body[c : c+n])})
			c += n
		}
		var seen ttAttempts
		_, script, tr := scripted(replies{retryhttptest.Stream(chunks...), retryhttptest.Stream(retryhttptest.Chunk{Data: healthy})},
			WithStreamRetry(0), WithObserver(seen.observe))
		resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, "https://api.example.com/v1/stream", nil))
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())

		var s signal.Stream
		v := s.Feed(body)
		if v.Kind == signal.StreamMore {
			v = s.End()
		}
		atts := seen.list()
		if v.Kind == signal.StreamError && streamClass(v.Status) != Permanent && !signal.ErrorBody(v.Payload).Exhausted &&
			!(signal.ErrorBody(v.Payload).DeadlineExceeded && v.Status == http.StatusGatewayTimeout) {
			require.Equal(t, 2, script.Len(), "%q: retried", body)
			require.Equal(t, healthy, string(got), "the retry's stream, exactly")
			require.Equal(t, v.Type, atts[0].StreamError)
			return
		}
		require.Equal(t, 1, script.Len(), "%q: handed over", body)
		require.True(t, bytes.Equal(body, got), "%q: the caller reads exactly the stream's bytes, read %q", body, got)
	})
}
