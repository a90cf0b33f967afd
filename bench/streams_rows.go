package bench

// The clients of the streams scenario (issue 38): the base alone, retryhttp
// with WithStreamRetry and without, the SDK of the dialect with its own
// retries and no retryhttp, and the peers as libs.go sets them up.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/retryhttp/retryhttp"
)

// A StreamsRow is one client of the streams tables. Each run builds it
// afresh over a base transport of its own.
type StreamsRow struct {
	Name string
	// Targets are issue 38's for a run of c (its fault); nil: none.
	Targets func(c StreamsConfig) StreamsTargets
	client  func(base *http.Transport, c StreamsConfig, url string) streamClient
}

// A streamClient makes one streamed call, begun at start, to the provider
// it was made for, and says when its first token reached the caller (0
// when none did) and whether the whole answer did, with no error. It is
// safe for concurrent use.
type streamClient func(ctx context.Context, start time.Time) (ttft time.Duration, whole bool, err error)

// StreamsRows are the rows of the streams tables for dialect d, in their
// order.
func StreamsRows(d StreamDialect) []StreamsRow {
	withStreams := func(opts ...retryhttp.Option) func(http.RoundTripper, StreamsConfig) http.RoundTripper {
		return func(base http.RoundTripper, c StreamsConfig) http.RoundTripper {
			return retryhttp.New(base, append(c.retryhttpOptions(), append(opts, retryhttp.WithStreamRetry(c.FirstToken))...)...)
		}
	}
	return []StreamsRow{
		{Name: "bare (net/http)", client: httpStreams(func(base http.RoundTripper, _ StreamsConfig) http.RoundTripper { return base })},
		{Name: "retryhttp + WithStreamRetry", client: httpStreams(withStreams()), Targets: defaultTargets},
		{Name: "retryhttp WithMaxRetries(4) + WithStreamRetry", client: httpStreams(withStreams(retryhttp.WithMaxRetries(4))), Targets: retries4Targets},
		{Name: "retryhttp (no WithStreamRetry)", client: httpStreams(func(base http.RoundTripper, c StreamsConfig) http.RoundTripper {
			return retryhttp.New(base, c.retryhttpOptions()...)
		}),
			Targets: healthyTargets},
		sdkRow(d),
		{Name: "go-retryablehttp", client: httpStreams(func(base http.RoundTripper, _ StreamsConfig) http.RoundTripper {
			return Retryablehttp.Wrap(base, Shaped)
		})},
		{Name: "failsafe-go", client: httpStreams(func(base http.RoundTripper, _ StreamsConfig) http.RoundTripper { return Failsafe.Wrap(base, Shaped) })},
	}
}

// retryhttpOptions are the retryhttp rows' options but their own: c's
// Backoff when it has one.
func (c StreamsConfig) retryhttpOptions() []retryhttp.Option {
	if c.Backoff <= 0 {
		return nil
	}
	return []retryhttp.Option{retryhttp.WithBackoff(retryhttp.Backoff{Base: c.Backoff, Factor: 2, Max: 30 * time.Second, Jitter: 0.2})}
}

// healthyTargets: with no fault, every call completes, one request each,
// its first token no later than the bare transport's, give or take 1 ms
// (the medians).
func healthyTargets(c StreamsConfig) StreamsTargets {
	if c.Fault == NoFault {
		return StreamsTargets{Share: 1, PerCompleted: 1, OverBare: time.Millisecond}
	}
	return StreamsTargets{}
}

// defaultTargets are retryhttp's with its default retries: 30% of streams
// overloaded, at least 0.97 of the calls completed (1 − 0.3³ = 0.973 is
// the most 3 tries can carry) at 1.5 requests per call at most; 10%
// stalled 30 s, at least 0.99, the p99 first token within 3 s, 1.2
// requests per call.
func defaultTargets(c StreamsConfig) StreamsTargets {
	switch c.Fault {
	case FaultOverloaded:
		return StreamsTargets{Share: 0.97, PerCompleted: 1.5}
	case FaultStall:
		return StreamsTargets{Share: 0.99, P99: 3 * time.Second, PerCompleted: 1.2}
	}
	return healthyTargets(c)
}

// retries4Targets: with 5 tries, at least 0.995 of the calls through 30%
// of streams overloaded (1 − 0.3⁵ = 0.998).
func retries4Targets(c StreamsConfig) StreamsTargets {
	if c.Fault == FaultOverloaded {
		return StreamsTargets{Share: 0.995}
	}
	return healthyTargets(c)
}

// streamRequest is the body a raw client POSTs; the provider reads no more
// of it than an SDK's.
var streamRequest = []byte(`{"model":"m","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"Say hello."}]}`)

// httpStreams is a client that POSTs streamRequest through an http.Client
// whose transport wrap makes of the base, and reads the stream as an SDK
// would, a read at a time: the first token is when its bytes are read.
func httpStreams(wrap func(http.RoundTripper, StreamsConfig) http.RoundTripper) func(*http.Transport, StreamsConfig, string) streamClient {
	return func(base *http.Transport, c StreamsConfig, url string) streamClient {
		client := &http.Client{Transport: wrap(base, c)}
		events := eventsOf(c.Dialect)
		path := "/v1/messages"
		if c.Dialect == StreamOpenAI {
			path = "/v1/chat/completions"
		}
		return func(ctx context.Context, start time.Time) (time.Duration, bool, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+path, bytes.NewReader(streamRequest))
			if err != nil {
				return 0, false, err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				return 0, false, err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return 0, false, fmt.Errorf("status %d", resp.StatusCode)
			}
			var body []byte
			var ttft time.Duration
			buf := make([]byte, 4<<10)
			for {
				n, err := resp.Body.Read(buf)
				body = append(body, buf[:n]...)
				if ttft == 0 && n > 0 && bytes.Contains(body[max(0, len(body)-n-len(events.tokenMark)):], []byte(events.tokenMark)) {
					ttft = time.Since(start)
				}
				switch {
				case err == io.EOF:
					return ttft, events.whole(string(body), c.Tokens), nil
				case err != nil:
					return ttft, false, err
				}
			}
		}
	}
}

// sdkRow is the dialect's SDK, with its own retries (2, its default), its
// client over the run's base transport, and no retryhttp: the stream read
// through its stream type, accumulated as its docs show.
func sdkRow(d StreamDialect) StreamsRow {
	if d == StreamOpenAI {
		return StreamsRow{Name: "openai-go (its own retries)", client: openaiStreams}
	}
	return StreamsRow{Name: "anthropic-sdk-go (its own retries)", client: anthropicStreams}
}

func anthropicStreams(base *http.Transport, c StreamsConfig, url string) streamClient {
	client := anthropic.NewClient(anthropicoption.WithBaseURL(url), anthropicoption.WithAPIKey("sk-ant-fake"),
		anthropicoption.WithHTTPClient(&http.Client{Transport: base}))
	return func(ctx context.Context, start time.Time) (time.Duration, bool, error) {
		stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model: anthropic.ModelClaudeSonnet4_5, MaxTokens: 256,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))},
		})
		defer stream.Close()
		var ttft time.Duration
		var message anthropic.Message
		for stream.Next() {
			ev := stream.Current()
			if ttft == 0 && ev.Type == "content_block_delta" {
				ttft = time.Since(start)
			}
			if err := message.Accumulate(ev); err != nil {
				return ttft, false, err
			}
		}
		if err := stream.Err(); err != nil {
			return ttft, false, err
		}
		whole := len(message.Content) == 1 && message.Content[0].Text == strings.Repeat("tk", c.Tokens) && message.StopReason == "end_turn"
		return ttft, whole, nil
	}
}

func openaiStreams(base *http.Transport, c StreamsConfig, url string) streamClient {
	client := openai.NewClient(openaioption.WithBaseURL(url+"/v1"), openaioption.WithAPIKey("sk-fake"),
		openaioption.WithHTTPClient(&http.Client{Transport: base}))
	return func(ctx context.Context, start time.Time) (time.Duration, bool, error) {
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:    openai.ChatModelGPT4o,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
		})
		defer stream.Close()
		var ttft time.Duration
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			chunk := stream.Current()
			if ttft == 0 && len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
				ttft = time.Since(start)
			}
			acc.AddChunk(chunk)
		}
		if err := stream.Err(); err != nil {
			return ttft, false, err
		}
		whole := len(acc.Choices) == 1 && acc.Choices[0].Message.Content == strings.Repeat("tk", c.Tokens) && acc.Choices[0].FinishReason == "stop"
		return ttft, whole, nil
	}
}
