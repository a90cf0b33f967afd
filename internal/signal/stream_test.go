package signal

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/store"
)

// Event streams as the providers send them (R26): the openings, tokens and
// errors of each dialect. The shapes are the SDKs' (anthropic-sdk-go,
// openai-go, go-genai) and captures of real streams (vercel/ai's
// fixtures).

const (
	anthropicStart = "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":2,"service_tier":"standard"}}}` + "\n\n" +
		"event: content_block_start\n" +
		`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: ping\n" +
		`data: {"type": "ping"}` + "\n\n"
	anthropicDeltaLine = "event: content_block_delta\n"
	anthropicDelta     = anthropicDeltaLine +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}` + "\n\n"
	anthropicOverloaded = "event: error\n" +
		`data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n\n"
	anthropicStop = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":0}}` + "\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

	chatRole        = `data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_2b52c53ea3","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"kX"}` + "\n\n"
	chatContentLine = `data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_2b52c53ea3","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"q"}` + "\n"
	chatContent     = chatContentLine + "\n"
	chatUsage       = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":0,"total_tokens":9}}` + "\n\n"
	chatDone        = "data: [DONE]\n\n"
	chatServer      = `data: {"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}` + "\n\n"

	responsesCreated = "event: response.created\n" +
		`data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1763474589,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":null,"model":"gpt-5-nano-2025-08-07","output":[],"parallel_tool_calls":true,"reasoning":{"effort":"medium","summary":null},"store":true,"temperature":1,"tools":[],"usage":null}}` + "\n\n" +
		"event: response.in_progress\n" +
		`data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","object":"response","created_at":1763474589,"status":"in_progress","error":null,"output":[]}}` + "\n\n"
	responsesMessage = "event: response.output_item.added\n" +
		`data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}` + "\n\n" +
		"event: response.content_part.added\n" +
		`data: {"type":"response.content_part.added","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}` + "\n\n"
	responsesTextLine = "event: response.output_text.delta\n"
	responsesText     = responsesTextLine +
		`data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","logprobs":[]}` + "\n\n"
	// As OpenAI sent it (vercel/ai's openai-error.1 capture): the error
	// nested, then a response.failed.
	responsesQuota = "event: error\n" +
		`data: {"type":"error","sequence_number":2,"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"You exceeded your current quota, please check your plan and billing details.","param":null}}` + "\n\n"
	responsesFailedQuota = "event: response.failed\n" +
		`data: {"type":"response.failed","sequence_number":3,"response":{"id":"resp_1","object":"response","status":"failed","error":{"code":"insufficient_quota","message":"You exceeded your current quota."},"output":[]}}` + "\n\n"
	// As openai-go's ResponseErrorEvent documents it: the fields at the top.
	responsesServer = "event: error\n" +
		`data: {"type":"error","code":"server_error","message":"An error occurred while processing your request.","param":null,"sequence_number":2}` + "\n\n"

	geminiTextLine = `data: {"candidates": [{"content": {"parts": [{"text": "Hello"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 1,"totalTokenCount": 9},"modelVersion": "gemini-2.5-flash","responseId": "pZ1aaK"}` + "\r\n"
	geminiText     = geminiTextLine + "\r\n"
	geminiUsage    = `data: {"usageMetadata": {"promptTokenCount": 8,"totalTokenCount": 8},"modelVersion": "gemini-2.5-flash","responseId": "pZ1aaK"}` + "\r\n\r\n"
	gemini503      = `data: {"error": {"code": 503,"message": "The model is overloaded. Please try again later.","status": "UNAVAILABLE"}}` + "\r\n\r\n"
)

// streamCase is a body and what a Stream says of it. At is
// strings.Index(body, at) + len(at), less the \n of an at ending in \r\n
// (the \r ends the line); at "" is the whole body, or for StreamEnded the
// bytes End saw: len(body).
type streamCase struct {
	name    string
	body    string
	kind    StreamKind
	at      string
	dialect string
	typ     string
	status  int
	payload string // "" to leave unchecked
}

var streamCases = []streamCase{
	// Anthropic Messages.
	{name: "anthropic token after the opening", body: anthropicStart + anthropicDelta, kind: StreamToken, at: anthropicStart + anthropicDeltaLine, dialect: DialectAnthropic},
	{name: "anthropic overloaded after the opening", body: anthropicStart + anthropicOverloaded + anthropicDelta, kind: StreamError, at: anthropicStart + anthropicOverloaded, dialect: DialectAnthropic, typ: "overloaded_error", status: 529,
		payload: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
	{name: "anthropic overloaded first", body: anthropicOverloaded, kind: StreamError, at: anthropicOverloaded, dialect: DialectAnthropic, typ: "overloaded_error", status: 529},
	{name: "anthropic api_error", body: anthropicStart + "event: error\ndata: {\"type\": \"error\", \"error\": {\"details\": null, \"type\": \"api_error\", \"message\": \"Internal server error\"}}\n\n", kind: StreamError,
		dialect: DialectAnthropic, typ: "api_error", status: 500},
	{name: "anthropic ends with no token", body: anthropicStart + anthropicStop, kind: StreamEnded, dialect: DialectAnthropic},
	{name: "anthropic tool input, empty, is a token", body: anthropicStart + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"get_weather\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
		kind: StreamToken, at: anthropicDeltaLine, dialect: DialectAnthropic},
	{name: "anthropic with no event lines", body: "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"content\":[]}}\n\ndata: {\"type\":\"ping\"}\n\n" +
		"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
		kind: StreamToken, at: "\"Hi\"}}\n", dialect: DialectAnthropic},
	{name: "anthropic error event ended by the body, not by a blank line", body: anthropicStart + strings.TrimSuffix(anthropicOverloaded, "\n"), kind: StreamEnded, dialect: DialectAnthropic},
	{name: "an error event with no JSON is an error", body: "event: error\ndata: oops\n\n", kind: StreamError, dialect: DialectSSE, typ: "error", payload: "oops"},

	// OpenAI Chat Completions.
	{name: "chat token after the role chunk", body: chatRole + chatContent, kind: StreamToken, at: chatRole + chatContentLine, dialect: DialectChat},
	{name: "chat token first", body: chatContent, kind: StreamToken, at: chatContentLine, dialect: DialectChat},
	{name: "chat tool call", body: chatRole + `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}` + "\n\n",
		kind: StreamToken, at: `"finish_reason":null}]}` + "\n", dialect: DialectChat},
	{name: "chat refusal", body: chatRole + `data: {"choices":[{"index":0,"delta":{"refusal":"I can't help with that."}}]}` + "\n\n", kind: StreamToken, at: "that.\"}}]}\n", dialect: DialectChat},
	{name: "chat reasoning_content (DeepSeek)", body: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"Let"}}]}` + "\n\n", kind: StreamToken, at: "Let\"}}]}\n", dialect: DialectChat},
	{name: "legacy completions text", body: `data: {"id":"cmpl-1","object":"text_completion","choices":[{"text":"","index":0}]}` + "\n\n" + `data: {"id":"cmpl-1","object":"text_completion","choices":[{"text":" Hi","index":0}]}` + "\n\n",
		kind: StreamToken, at: "\" Hi\",\"index\":0}]}\n", dialect: DialectChat},
	{name: "azure's filter results are no token", body: `data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}` + "\n\n" +
		`data: {"choices":[{"content_filter_results":{},"delta":{},"finish_reason":null,"index":0}],"object":"chat.completion.chunk"}` + "\n\n" + chatContent,
		kind: StreamToken, at: chatContentLine, dialect: DialectChat},
	{name: "chat usage only, then [DONE]", body: chatRole + chatUsage + chatDone + chatContent, kind: StreamEnded, at: chatDone, dialect: DialectChat},
	{name: "chat server_error after the role chunk", body: chatRole + chatServer, kind: StreamError, at: chatServer, dialect: DialectChat, typ: "server_error", status: 500},
	{name: "chat rate limit", body: "data: " + openAIRate + "\n\n", kind: StreamError, dialect: DialectChat, typ: "rate_limit_exceeded", status: 429, payload: openAIRate},
	{name: "chat insufficient_quota", body: "data: " + openAIQuota + "\n\n", kind: StreamError, dialect: DialectChat, typ: "insufficient_quota", status: 429, payload: openAIQuota},
	{name: "chat [DONE] with no token", body: chatRole + chatDone, kind: StreamEnded, at: chatDone, dialect: DialectChat},

	// OpenAI Responses.
	{name: "responses text after the opening", body: responsesCreated + responsesMessage + responsesText, kind: StreamToken, at: responsesCreated + responsesMessage + responsesTextLine, dialect: DialectResponses},
	{name: "responses function call", body: responsesCreated + "event: response.output_item.added\n" +
		`data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"get_weather"}}` + "\n\n" +
		"event: response.function_call_arguments.delta\n" +
		`data: {"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_1","output_index":0,"delta":"{\""}` + "\n\n",
		kind: StreamToken, at: "event: response.function_call_arguments.delta\n", dialect: DialectResponses},
	{name: "responses reasoning summary", body: responsesCreated + "event: response.output_item.added\n" +
		`data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}` + "\n\n" +
		"event: response.reasoning_summary_part.added\n" +
		`data: {"type":"response.reasoning_summary_part.added","sequence_number":3,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}` + "\n\n" +
		"event: response.reasoning_summary_text.delta\n" +
		`data: {"type":"response.reasoning_summary_text.delta","sequence_number":4,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"**Counting**"}` + "\n\n",
		kind: StreamToken, at: "event: response.reasoning_summary_text.delta\n", dialect: DialectResponses},
	{name: "responses web search in progress is no token", body: responsesCreated +
		"event: response.web_search_call.in_progress\ndata: {\"type\":\"response.web_search_call.in_progress\",\"sequence_number\":3,\"output_index\":0,\"item_id\":\"ws_1\"}\n\n" +
		"event: response.web_search_call.searching\ndata: {\"type\":\"response.web_search_call.searching\",\"sequence_number\":4,\"output_index\":0,\"item_id\":\"ws_1\"}\n\n" +
		"event: response.web_search_call.completed\ndata: {\"type\":\"response.web_search_call.completed\",\"sequence_number\":5,\"output_index\":0,\"item_id\":\"ws_1\"}\n\n",
		kind: StreamToken, at: "event: response.web_search_call.completed\n", dialect: DialectResponses},
	{name: "responses insufficient_quota as sent", body: responsesCreated + responsesQuota + responsesFailedQuota, kind: StreamError, at: responsesCreated + responsesQuota, dialect: DialectResponses,
		typ: "insufficient_quota", status: 429},
	{name: "responses server_error as documented", body: responsesCreated + responsesServer, kind: StreamError, dialect: DialectResponses, typ: "server_error", status: 500,
		payload: `{"error":{"type":"error","code":"server_error","message":"An error occurred while processing your request.","param":null,"sequence_number":2}}`},
	{name: "responses failed first", body: responsesCreated + responsesFailedQuota, kind: StreamError, dialect: DialectResponses, typ: "insufficient_quota", status: 429,
		payload: `{"id":"resp_1","object":"response","status":"failed","error":{"code":"insufficient_quota","message":"You exceeded your current quota."},"output":[]}`},
	{name: "responses failed with no error, then completed", body: responsesCreated +
		"event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"resp_1\",\"error\":null}}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"error\":null}}\n\n",
		kind: StreamEnded, dialect: DialectResponses},
	{name: "responses with no event lines, type last", body: `data: {"response":{"error":null,"id":"r","output":[],"status":"in_progress"},"sequence_number":0,"type":"response.created"}` + "\n\n" +
		`data: {"item":{"content":[],"id":"rs","summary":[],"type":"reasoning"},"output_index":0,"sequence_number":2,"type":"response.output_item.added"}` + "\n\n" +
		`data: {"delta":"Hi","item_id":"m","output_index":0,"sequence_number":4,"type":"response.output_text.delta"}` + "\n\n",
		kind: StreamToken, at: `"type":"response.output_text.delta"}` + "\n", dialect: DialectResponses},

	// Gemini (alt=sse), in \r\n as Google sends it.
	{name: "gemini token", body: geminiText, kind: StreamToken, at: geminiTextLine, dialect: DialectGemini},
	{name: "gemini usage only, then a token", body: geminiUsage + geminiText, kind: StreamToken, at: geminiUsage + geminiTextLine, dialect: DialectGemini},
	{name: "gemini unavailable", body: gemini503, kind: StreamError, dialect: DialectGemini, typ: "UNAVAILABLE", status: 503},
	{name: "gemini blocked prompt ends with no token", body: `data: {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},"usageMetadata": {"promptTokenCount": 8},"modelVersion": "gemini-2.5-flash"}` + "\r\n\r\n",
		kind: StreamEnded, dialect: DialectGemini},
	{name: "gemini empty parts are no token", body: `data: {"candidates": [{"content": {"parts": [],"role": "model"},"index": 0}]}` + "\n\n" +
		`data: {"candidates": [{"content": {"parts": [{"thought": true,"text": "Hmm"}]}}]}` + "\n\n", kind: StreamToken, at: "Hmm\"}]}}]}\n", dialect: DialectGemini},
	{name: "gemini error as a bare JSON body (go-genai)", body: `{"error": {"code": 500, "message": "internal server error", "status": "INTERNAL_SERVER_ERROR"}}`, kind: StreamError,
		dialect: DialectGemini, typ: "INTERNAL_SERVER_ERROR", status: 500},
	{name: "gemini error as a pretty-printed JSON body", body: "{\n  \"error\": {\n    \"code\": 503,\n    \"message\": \"The model is overloaded.\",\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n", kind: StreamError,
		at: "}\n}", dialect: DialectGemini, typ: "UNAVAILABLE", status: 503},
	{name: "a bare JSON body that is no error", body: `{"candidates": []}` + "\n", kind: StreamToken, at: "}", dialect: DialectSSE},

	// Generic SSE.
	{name: "plain data is a token", body: ": hello\n\ndata: hi there\n\n", kind: StreamToken, at: "data: hi there\n", dialect: DialectSSE},
	{name: "comments, keep-alives, id and retry before a token", body: ": keep-alive\n\n:\n\nid: 7\nretry: 1000\n\nevent: ping\n\n" + anthropicStart + ": OPENROUTER PROCESSING\n\n" + anthropicDelta,
		kind: StreamToken, at: ": OPENROUTER PROCESSING\n\n" + anthropicDeltaLine, dialect: DialectAnthropic},
	{name: "empty data is no token", body: "data:\n\ndata\n\ndata:  \n\n", kind: StreamEnded, dialect: DialectSSE},
	{name: "an unknown JSON event is a token", body: "event: update\ndata: {\"status\":\"ok\"}\n\n", kind: StreamToken, at: "{\"status\":\"ok\"}\n", dialect: DialectSSE},
	{name: "an event named after its data", body: "data: {\"error\":{\"type\":\"overloaded_error\"}}\nevent: ping\n\n" + chatContent, kind: StreamToken, at: chatContentLine, dialect: DialectChat},
	{name: "a name with two spaces is another name", body: "event:  content_block_delta\ndata: {\"type\":\"ping\"}\n\n", kind: StreamEnded, dialect: DialectAnthropic},
	{name: "empty body", body: "", kind: StreamEnded, dialect: DialectSSE},
	{name: "a line the body ends in is dropped", body: "data: hello", kind: StreamEnded, dialect: DialectSSE},

	// Data of several lines, joined with \n.
	{name: "multi-line error", body: "event: error\ndata: {\"type\":\"error\",\ndata: \"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", kind: StreamError,
		dialect: DialectAnthropic, typ: "overloaded_error", status: 529, payload: "{\"type\":\"error\",\n\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"},
	{name: "multi-line chat chunk", body: "data: {\"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"Hi\"}}]}\n\n", kind: StreamToken, at: "\n\n", dialect: DialectChat},
	{name: "multi-line role chunk", body: "data: {\"choices\":[{\"index\":0,\nid: 1\ndata: \"delta\":{\"role\":\"assistant\"}}]}\n\n" + gemini503, kind: StreamError, dialect: DialectGemini, typ: "UNAVAILABLE", status: 503},
	{name: "multi-line plain data", body: "data: hello\ndata: world\n\n", kind: StreamToken, at: "data: hello\n", dialect: DialectSSE},
}

// TestStream: each case, whole, byte by byte, cut in two at every byte and
// in random pieces, with \n, \r\n and \r line ends and behind a BOM, gives
// the same verdict; and the bytes up to its At alone give it too.
func TestStream(t *testing.T) {
	for _, tt := range streamCases {
		for _, variant := range streamVariants {
			t.Run(tt.name+"/"+variant.name, func(t *testing.T) {
				body := variant.bom + variant.eol(tt.body)
				want := flatVerdict(StreamVerdict{Kind: tt.kind, Dialect: tt.dialect, Type: tt.typ, Status: tt.status, At: len(body)})
				if tt.at != "" || tt.kind != StreamEnded {
					at := variant.eol(tt.at)
					if tt.at == "" {
						at = body
					}
					i := strings.Index(body, at)
					require.GreaterOrEqual(t, i, 0, "the case's at is in its body")
					want.At = i + len(at)
					if strings.HasSuffix(at, "\r\n") {
						want.At-- // a line is ended by its \r
					}
				}
				got := feedWhole(t, []byte(body))
				if tt.payload == "" {
					want.Payload = got.Payload
				} else {
					want.Payload = tt.payload
				}
				require.Equal(t, want, got, "%q", body)
				requireSplitFree(t, []byte(body))
			})
		}
	}
}

// streamVariants are the ways a body may be sent: as written, with each
// line end, and behind a BOM.
var streamVariants = []struct {
	name string
	eol  func(string) string
	bom  string
}{
	{"as written", asWritten, ""},
	{"LF", func(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }, ""},
	{"CRLF", func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n") }, ""},
	{"CR", func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r") }, ""},
	{"BOM", asWritten, "\xef\xbb\xbf"},
}

func asWritten(s string) string { return s }

// verdict is a StreamVerdict that require.Equal prints readably.
type verdict struct {
	Kind    StreamKind
	At      int
	Dialect string
	Type    string
	Status  int
	Payload string
}

func flatVerdict(v StreamVerdict) verdict {
	return verdict{v.Kind, v.At, v.Dialect, v.Type, v.Status, string(v.Payload)}
}

// feedSplit feeds body to a new Stream as a transport reads it: the bytes
// read so far, growing to each cut, then the whole, then End when nothing
// was decided.
func feedSplit(body []byte, cuts []int) StreamVerdict {
	var s Stream
	for _, c := range cuts {
		if v := s.Feed(body[:c]); v.Kind != StreamMore {
			return v
		}
	}
	if v := s.Feed(body); v.Kind != StreamMore {
		return v
	}
	return s.End()
}

func feedWhole(t *testing.T, body []byte) verdict {
	t.Helper()
	return flatVerdict(feedSplit(body, nil))
}

// requireSplitFree requires that body gives one verdict however it is cut:
// byte by byte, in two at every byte, in random pieces; and that the bytes
// up to the verdict's At give it.
func requireSplitFree(t *testing.T, body []byte) {
	t.Helper()
	want := feedWhole(t, body)
	require.LessOrEqual(t, want.At, min(len(body), MaxStreamAhead), "At is within the body")
	require.Equal(t, want, flatVerdict(feedSplit(body, bytewise(len(body)))), "byte by byte")
	for c := range len(body) {
		require.Equal(t, want, flatVerdict(feedSplit(body, []int{c})), "cut at %d", c)
	}
	r := rand.New(rand.NewPCG(uint64(len(body)), 1))
	for range 20 {
		var cuts []int
		for c := 0; c < len(body); c += 1 + r.IntN(64) {
			cuts = append(cuts, c)
		}
		require.Equal(t, want, flatVerdict(feedSplit(body, cuts)), "cut at %v", cuts)
	}
	require.Equal(t, want, feedWhole(t, body[:want.At]), "the bytes up to At alone")
}

// TestStreamErrorStatus: each error type a provider sends in a stream
// stands for the status it sends without one, and ErrorBody reads the
// payload for the rest (R19): Gemini's wait and per-day quota, OpenAI's
// insufficient_quota, Google's DEADLINE_EXCEEDED.
func TestStreamErrorStatus(t *testing.T) {
	anthropic := func(typ string) string {
		return "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"" + typ + "\",\"message\":\"m\"}}\n\n"
	}
	tests := []struct {
		body   string
		typ    string
		status int
		hint   Hint
	}{
		{anthropic("invalid_request_error"), "invalid_request_error", 400, Hint{}},
		{anthropic("authentication_error"), "authentication_error", 401, Hint{}},
		{anthropic("billing_error"), "billing_error", 402, Hint{}},
		{anthropic("permission_error"), "permission_error", 403, Hint{}},
		{anthropic("not_found_error"), "not_found_error", 404, Hint{}},
		{anthropic("request_too_large"), "request_too_large", 413, Hint{}},
		{anthropic("rate_limit_error"), "rate_limit_error", 429, Hint{}},
		{anthropic("api_error"), "api_error", 500, Hint{}},
		{anthropic("timeout_error"), "timeout_error", 504, Hint{}},
		{anthropic("overloaded_error"), "overloaded_error", 529, Hint{}},
		{anthropic("some_new_error"), "some_new_error", 0, Hint{}},
		{"data: " + openAIQuota + "\n\n", "insufficient_quota", 429, Hint{Exhausted: true}},
		{"data: " + openAIRate + "\n\n", "rate_limit_exceeded", 429, Hint{Limits: 1 << store.Tokens}},
		{`data: {"error":{"message":"m","type":"service_unavailable_error","param":null,"code":"server_is_overloaded"}}` + "\n\n", "server_is_overloaded", 503, Hint{}},
		{`data: {"error":{"message":"m","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}` + "\n\n", "context_length_exceeded", 400, Hint{}},
		{responsesQuota, "insufficient_quota", 429, Hint{Exhausted: true}},
		{responsesFailedQuota, "insufficient_quota", 429, Hint{Exhausted: true}},
		{"event: error\ndata: {\"type\":\"error\",\"code\":\"insufficient_quota\",\"message\":\"m\",\"param\":null,\"sequence_number\":1}\n\n", "insufficient_quota", 429, Hint{Exhausted: true}},
		{"data: " + geminiPerMinute + "\n\n", "RESOURCE_EXHAUSTED", 429, Hint{RetryAfter: 45837906927 * time.Nanosecond, Limits: 1 << store.Requests}},
		{"data: " + geminiPerDay + "\n\n", "RESOURCE_EXHAUSTED", 429, Hint{RetryAfter: 45837906927 * time.Nanosecond, Exhausted: true, Limits: 1 << store.Requests}},
		{"data: " + google504 + "\n\n", "DEADLINE_EXCEEDED", 504, Hint{DeadlineExceeded: true}},
		{`data: {"error":{"code":"503","message":"m"}}` + "\n\n", "503", 503, Hint{}},
		{`data: {"error":{"status":"UNAVAILABLE"}}` + "\n\n", "UNAVAILABLE", 503, Hint{}},
		{`data: {"error":{"message":"Overloaded, please retry."}}` + "\n\n", "error", 0, Hint{}},
		{`data: {"error":{"type":"Overloaded, please retry.","code":"` + pad(65) + `","status":"UNAVAILABLE"}}` + "\n\n", "UNAVAILABLE", 503, Hint{}},
	}
	for _, tt := range tests {
		var s Stream
		s.Feed([]byte(tt.body))
		v := s.End()
		require.Equal(t, StreamError, v.Kind, "%q", tt.body)
		assert.Equal(t, tt.typ, v.Type, "%q: the type", tt.body)
		assert.Equal(t, tt.status, v.Status, "%q: the status", tt.body)
		assert.Equal(t, tt.hint, ErrorBody(v.Payload), "%q: ErrorBody of the payload", tt.body)
	}
}

// TestStreamCap: with no token in MaxStreamAhead bytes the stream is
// capped there, however long its lines; a token whose line ends at the
// cap's last byte is a token.
func TestStreamCap(t *testing.T) {
	keepAlives := strings.Repeat(": keep-alive\n\n", MaxStreamAhead/14+1)
	pings := strings.Repeat("event: ping\ndata: {\"type\": \"ping\"}\n\n", MaxStreamAhead/36+1)
	huge := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"content\":\"" + pad(MaxStreamAhead) + "\"}}\n\n" + anthropicDelta
	noEOL := "data: " + pad(MaxStreamAhead)
	for _, body := range []string{keepAlives, pings, huge, noEOL, anthropicStart + pings + anthropicDelta} {
		v := feedSplit([]byte(body), nil)
		assert.Equal(t, StreamCapped, v.Kind, "%.40q", body)
		assert.Equal(t, MaxStreamAhead, v.At, "%.40q", body)
		assert.Equal(t, v, feedSplit([]byte(body[:MaxStreamAhead]), nil), "%.40q: the first MaxStreamAhead bytes alone", body)
	}

	line := "data: hi\n"
	comment := func(n int) string { return ":" + pad(n-2) + "\n" } // a line of n bytes
	atCap := comment(MaxStreamAhead-len(line)) + line
	v := feedSplit([]byte(atCap+"more"), nil)
	assert.Equal(t, StreamVerdict{Kind: StreamToken, At: MaxStreamAhead, Dialect: DialectSSE}, v, "a token ending at the cap")
	pastCap := comment(MaxStreamAhead-len(line)+1) + line
	assert.Equal(t, StreamCapped, feedSplit([]byte(pastCap), nil).Kind, "a token ending past the cap")
}

// TestStreamFinal: a verdict other than StreamMore is final; feeding more,
// or less, or ending changes nothing.
func TestStreamFinal(t *testing.T) {
	for _, body := range []string{anthropicDelta, anthropicOverloaded, chatDone, strings.Repeat(":\n", MaxStreamAhead)} {
		var s Stream
		v := s.Feed([]byte(body))
		require.NotEqual(t, StreamMore, v.Kind, "%.40q", body)
		assert.Equal(t, v, s.Feed([]byte(body+anthropicOverloaded+chatContent)), "%.40q: fed more", body)
		assert.Equal(t, v, s.Feed(nil), "%.40q: fed less", body)
		assert.Equal(t, v, s.End(), "%.40q: ended", body)
	}
	var s Stream
	v := s.End()
	assert.Equal(t, StreamVerdict{Kind: StreamEnded, Dialect: DialectSSE}, v, "ended unfed")
	assert.Equal(t, v, s.Feed([]byte(anthropicDelta)), "fed after End")
}

// TestStreamMore: a stream says StreamMore until it is decided, fed less
// than it was (a transport's error) included; a BOM's first bytes wait.
func TestStreamMore(t *testing.T) {
	var s Stream
	for _, fed := range []string{"", "\xef", "\xef\xbb", "\xef\xbb\xbf", "\xef\xbb\xbfevent: message_start\n", "\xef", "\xef\xbb\xbf" + anthropicStart} {
		assert.Equal(t, StreamVerdict{}, s.Feed([]byte(fed)), "fed %q", fed)
	}
	assert.Equal(t, StreamEnded, s.End().Kind)
}

// TestStreamKindString names each kind.
func TestStreamKindString(t *testing.T) {
	names := map[StreamKind]string{StreamMore: "more", StreamToken: "token", StreamError: "error", StreamEnded: "ended", StreamCapped: "capped", 9: "StreamKind(9)"}
	for k, name := range names {
		assert.Equal(t, name, k.String())
	}
}

// TestStreamAllocations: a healthy opening, fed whole, in a piece per
// event or byte by byte, allocates nothing (the transport embeds the
// Stream); data of several lines allocates the buffer that joins them.
func TestStreamAllocations(t *testing.T) {
	tests := []struct {
		body   string
		allocs float64
	}{
		{anthropicStart + anthropicDelta, 0},
		{chatRole + chatContent, 0},
		{responsesCreated + responsesMessage + responsesText, 0},
		{geminiUsage + geminiText, 0},
		{"data: {\"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"Hi\"}}]}\n\n", 2}, // the join, growing
	}
	for _, tt := range tests {
		b := []byte(tt.body)
		for _, cuts := range [][]int{nil, eventEnds(b), bytewise(len(b))} {
			allocs := testing.AllocsPerRun(20, func() {
				if feedSplit(b, cuts).Kind != StreamToken {
					t.Fatal("no token")
				}
			})
			assert.LessOrEqual(t, allocs, tt.allocs, "allocations per opening %.40q, cut at %v", tt.body, cuts)
		}
	}
}

func bytewise(n int) []int {
	cuts := make([]int, n)
	for i := range cuts {
		cuts[i] = i
	}
	return cuts
}

// eventEnds is where each event of body ends, as a server writes them.
func eventEnds(body []byte) []int {
	var ends []int
	for i := 1; i < len(body); i++ {
		if body[i] == '\n' && (body[i-1] == '\n' || body[i-1] == '\r' && i > 1 && body[i-2] == '\n') {
			ends = append(ends, i+1)
		}
	}
	return ends
}

// BenchmarkStreamFirstToken: the openings up to their first token, fed in
// a piece per event as servers write them, and whole.
func BenchmarkStreamFirstToken(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"anthropic", anthropicStart + anthropicDelta},
		{"openai-chat", chatRole + chatContent},
		{"openai-responses", responsesCreated + responsesMessage + responsesText},
		{"gemini", geminiUsage + geminiText},
	} {
		body := []byte(bc.body)
		for _, split := range []struct {
			name string
			cuts []int
		}{{"events", eventEnds(body)}, {"whole", nil}} {
			b.Run(bc.name+"/"+split.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if feedSplit(body, split.cuts).Kind != StreamToken {
						b.Fatal("no token")
					}
				}
			})
		}
	}
}

// BenchmarkStreamBytewise: MaxStreamAhead bytes with no token, fed byte by
// byte, cost a pass: linear, whatever the line ends.
func BenchmarkStreamBytewise(b *testing.B) {
	for _, bc := range []struct{ name, line string }{
		{"keep-alives", ": keep-alive\n\n"},
		{"CR", ":\r"},
		{"one line", pad(MaxStreamAhead)},
	} {
		body := []byte(strings.Repeat(bc.line, MaxStreamAhead/len(bc.line)+1)[:MaxStreamAhead])
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				var s Stream
				for i := range body {
					s.Feed(body[:i+1])
				}
				if s.Feed(body).Kind != StreamCapped {
					b.Fatal("not capped")
				}
			}
		})
	}
}
