package signal

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// How a stream is read (R26). The grammar is the WHATWG server-sent events':
// a line ends at \n, \r\n or \r; a UTF-8 BOM at the start is skipped; a line
// starting with ':' is a comment (a keep-alive); the field "event" names the
// event, each "data" line adds to its data (the lines joined with \n), and
// "id", "retry" and every other field are ignored; a blank line dispatches
// the event, and an event with no data line is none. A line the body ends
// in, and an event the body ends before its blank line, are dropped, as the
// spec and the SDKs' decoders drop them.
//
// An event is named by its "event" field or, when that is a name no
// dialect uses (absent, "message", another), by its data's top-level
// "type" string; with neither, its data's shape tells. A token named by an
// event field is certain when that line ends; one read from data, when its
// first data line ends holding a whole JSON object (or anything but the
// start of one); data of several lines is read whole at the event's
// dispatch. An error is decided at its event's dispatch, as the SDKs read
// it: an event is an error once it is one whole. The names:
//
//	anthropic (Anthropic Messages)
//	  not a token: message_start, content_block_start, ping,
//	    content_block_stop, message_delta, message_stop
//	  token: content_block_delta, as soon as its event line ends
//	  error: error, data {"type":"error","error":{"type":..., "message":...}}
//	openai-responses (OpenAI Responses)
//	  not a token: the openings response.created, response.queued,
//	    response.in_progress, and every response.* name ending in .added,
//	    .in_progress, .searching, .generating or .interpreting
//	    (response.output_item.added, response.content_part.added,
//	    response.reasoning_summary_part.added,
//	    response.web_search_call.searching...); the closings
//	    response.completed and response.incomplete
//	  token: any other response.* event, as soon as its event line ends;
//	    the first is a delta: response.output_text.delta, .refusal.delta,
//	    .function_call_arguments.delta, .reasoning_summary_text.delta,
//	    .reasoning_text.delta, .audio.delta, .custom_tool_call_input.delta...
//	    (reasoning counts: it is the model's output, and the sign it runs)
//	  error: error (its data {"type":"error","code":...} as documented, or
//	    {"type":"error","error":{"type":...,"code":...}} as sent), and
//	    response.failed whose response.error is an object (one whose error
//	    is null is a closing)
//	openai-chat (OpenAI Chat Completions, and its legacy Completions)
//	  not a token: a chunk whose choices' deltas hold nothing but a role and
//	    empty values (the role-only first chunk, Azure's filter results),
//	    or with choices [] (usage only); data [DONE] ends the stream
//	  token: a chunk with a choice whose delta holds a non-empty member
//	    other than role (content, refusal, tool_calls, function_call, audio,
//	    reasoning_content...) or whose text is non-empty, once its data line
//	    ends
//	  error: data {"error":{...}}
//	gemini (Gemini and Vertex AI, alt=sse)
//	  not a token: a chunk with no candidate whose content.parts is
//	    non-empty (usageMetadata or promptFeedback alone)
//	  token: a candidate whose content.parts is non-empty, once its data
//	    line ends
//	  error: data {"error":{"code":503,"status":"UNAVAILABLE",...}}; and a
//	    body that is not SSE but one JSON object (its first byte '{'), an
//	    error envelope, as go-genai reads it
//	sse (any other)
//	  not a token: data that is empty or blank
//	  token: any other event with data (in doubt, the stream is handed
//	    over, never retried)
//
// An error's Type is the first of its error object's code, type and status
// that is a short machine string (letters, digits, '_', '.', '-'; 64 bytes
// at most), never its message; "error" when none is. Its Status is the
// error object's code or status when that is an HTTP error status (Gemini's
// 503), else the first of code, type and status this table knows; 0 for
// none. R2 then makes 429 Throttled, 5xx but 501 and 505 Transient, and the
// rest (0 too) Permanent; ErrorBody(Payload) says what else the error asks
// (a RetryInfo's wait; Exhausted for insufficient_quota and a per-day
// quota; DeadlineExceeded), which makes it Permanent.
//
//	invalid_request_error, invalid_prompt 400   (Anthropic, OpenAI)
//	authentication_error 401, billing_error 402, permission_error 403,
//	not_found_error 404, request_too_large 413, rate_limit_error 429,
//	api_error 500, timeout_error 504, overloaded_error 529   (Anthropic)
//	invalid_api_key 401; rate_limit_exceeded, insufficient_quota,
//	credit_balance_exhausted, slow_down, tokens, requests 429;
//	server_error 500; server_is_overloaded, service_unavailable_error 503
//	(OpenAI)
//	INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE 400;
//	UNAUTHENTICATED 401; PERMISSION_DENIED 403; NOT_FOUND 404; ABORTED,
//	ALREADY_EXISTS 409; RESOURCE_EXHAUSTED 429; CANCELLED 499; UNKNOWN,
//	INTERNAL, DATA_LOSS 500; UNIMPLEMENTED 501; UNAVAILABLE 503;
//	DEADLINE_EXCEEDED 504   (google.rpc.Code)

// MaxStreamAhead is how much of an event stream is read ahead for its
// first token (R26): with no token in its first MaxStreamAhead bytes, the
// stream is handed over as it is.
const MaxStreamAhead = 64 << 10

// The dialects a StreamVerdict names: what the events say the provider
// speaks (stream.go lists each one's events).
const (
	DialectAnthropic = "anthropic"
	DialectChat      = "openai-chat"
	DialectResponses = "openai-responses"
	DialectGemini    = "gemini"
	DialectSSE       = "sse" // none of the above was recognized
)

// StreamKind is what a Stream has decided of a body.
type StreamKind uint8

// The StreamKinds.
const (
	StreamMore   StreamKind = iota // nothing yet: read more
	StreamToken                    // a token has started: hand the stream over
	StreamError                    // an error event came first: the try failed as Status
	StreamEnded                    // the stream ended with no token: hand it over
	StreamCapped                   // MaxStreamAhead bytes and no token: hand it over
)

// String names the kind: "more", "token", "error", "ended", "capped".
func (k StreamKind) String() string {
	switch k {
	case StreamMore:
		return "more"
	case StreamToken:
		return "token"
	case StreamError:
		return "error"
	case StreamEnded:
		return "ended"
	case StreamCapped:
		return "capped"
	}
	return "StreamKind(" + strconv.Itoa(int(k)) + ")"
}

// StreamVerdict is what a Stream has decided; the zero StreamVerdict is
// StreamMore, nothing. At is the offset in the body just past the byte
// that decided it: the end of the line that made a token certain, of the
// blank line that dispatched an error or data [DONE]; MaxStreamAhead when
// capped; the bytes seen at End. Dialect is the dialect of the event that
// decided, else of the last one recognized before it, else DialectSSE.
//
// Type, Status and Payload are an error's (StreamError alone; see stream.go
// for the table): Type a short machine string ("overloaded_error",
// "UNAVAILABLE"), never the message; Status the HTTP status it stands for,
// 0 when none is known (Permanent); Payload an error envelope,
// {"error":{...}} at its top, for ErrorBody: the event's data, the
// response object of a response.failed, or a Responses error whose fields
// are at the top wrapped as {"error":data}. Payload may share memory with
// the bytes fed or with the Stream; neither changes it after the verdict.
type StreamVerdict struct {
	Kind    StreamKind
	At      int
	Dialect string
	Type    string
	Status  int
	Payload []byte
}

// Stream reads the start of a server-sent-events body (R26): does a token
// (the first event that carries the model's output) or an error event come
// first? Feed it the body as it arrives and End at its end; each says what
// is decided so far. A token is decided as soon as it is certain (for
// Anthropic and OpenAI Responses at the end of its event line, for a JSON
// chunk at the end of its data line), an error at its event's dispatch.
// The dialects, the names that are tokens and the statuses errors stand
// for are listed in stream.go.
//
// Feed takes every byte read so far, not only the new ones (the transport
// keeps them to replay): the reader keeps offsets into them, not a copy.
// Its work is linear however the bytes are cut (each is searched once for
// a line's end, and a data line's JSON read at most twice); it allocates
// nothing but the buffer that joins an event's data lines when there are
// several, and what reading an error event takes; it reads no further than
// MaxStreamAhead, and never panics, whatever the bytes. A verdict other than StreamMore is final: Feed and End return it
// again. The zero Stream is ready; one Stream reads one body, from one
// goroutine.
type Stream struct {
	verdict StreamVerdict
	n       int        // bytes seen, at most MaxStreamAhead
	pos     int        // the next byte to scan
	line    int        // where the line being read starts
	lf      int        // 1 + the offset of the next \n, when known (> pos)
	lfEnd   int        // no \n before it from pos (when lf is not known)
	cr      bool       // the last line ended at \r: a \n next ends no line
	mode    streamMode // SSE, or one bare JSON value
	dialect string     // of the last event recognized
	json    jsonDepth  // modeJSON's

	// The event being read: offsets into the body.
	name, data span
	dataLines  int
	class      eventClass // of the event, read when its first data line ended
	classOf    string     // the dialect class came with
	renamed    bool       // an event field came after data: class is stale
	joined     []byte     // the data of an event of more than one data line
}

type span struct{ start, end int }

type streamMode uint8

const (
	modeStart streamMode = iota // before the first byte (and a BOM)
	modeSSE
	modeJSON
)

// Feed reads the body's bytes read so far: read holds the bytes the last
// call got, unchanged, and those read since. A read shorter than the last
// changes nothing.
func (s *Stream) Feed(read []byte) StreamVerdict {
	if s.verdict.Kind != StreamMore || len(read) < s.n {
		return s.verdict
	}
	b := read[:min(len(read), MaxStreamAhead)]
	s.n = len(b)
	if s.mode == modeStart && !s.start(b) {
		return s.verdict
	}
	if s.mode == modeJSON {
		s.jsonValue(b)
	} else {
		s.lines(b)
	}
	if s.verdict.Kind == StreamMore && s.n == MaxStreamAhead {
		s.decide(StreamCapped, MaxStreamAhead, "")
	}
	return s.verdict
}

// End says the body ended (EOF) after the bytes last fed: with nothing
// decided, the stream ended with no token.
func (s *Stream) End() StreamVerdict {
	if s.verdict.Kind == StreamMore {
		s.decide(StreamEnded, s.n, "")
	}
	return s.verdict
}

func (s *Stream) decide(kind StreamKind, at int, dialect string) {
	if dialect == "" {
		dialect = s.dialect
	}
	if dialect == "" {
		dialect = DialectSSE
	}
	s.verdict = StreamVerdict{Kind: kind, At: at, Dialect: dialect}
}

// start skips a leading BOM and picks the mode by the first byte; false
// while there is none yet, or the bytes could still be a BOM's first.
func (s *Stream) start(b []byte) bool {
	const bom = "\xef\xbb\xbf"
	k := min(len(b), len(bom))
	if string(b[:k]) == bom[:k] {
		if k < len(bom) {
			return false
		}
		s.pos, s.line, s.lfEnd = k, k, k
	}
	if s.pos == len(b) {
		return false
	}
	s.mode = modeSSE
	if b[s.pos] == '{' { // not SSE: a JSON body (go-genai reads an error in it)
		s.mode, s.json.start = modeJSON, s.pos
	}
	return true
}

// lines reads each line b ends, from pos, until a verdict.
func (s *Stream) lines(b []byte) {
	for s.pos < len(b) && s.verdict.Kind == StreamMore {
		if s.cr {
			s.cr = false
			if b[s.pos] == '\n' { // the \n of a \r\n
				s.pos++
				s.line = s.pos
				continue
			}
		}
		eol := s.eol(b)
		if eol < 0 {
			s.pos = len(b)
			return
		}
		s.cr = b[eol] == '\r'
		s.pos = eol + 1
		s.field(b, s.line, eol)
		s.line = s.pos
	}
}

// eol is the offset of the first \n or \r at or after pos, -1 when b has
// none. It searches no byte twice for either: a \n found past a \r is
// kept in lf, a search that found none in lfEnd.
func (s *Stream) eol(b []byte) int {
	if s.lf <= s.pos {
		from := max(s.pos, s.lfEnd)
		s.lf = 0
		if i := bytes.IndexByte(b[from:], '\n'); i >= 0 {
			s.lf = from + i + 1
		} else {
			s.lfEnd = len(b)
		}
	}
	limit := len(b)
	if s.lf > s.pos {
		limit = s.lf - 1
	}
	if i := bytes.IndexByte(b[s.pos:limit], '\r'); i >= 0 {
		return s.pos + i
	}
	if s.lf > s.pos {
		return s.lf - 1
	}
	return -1
}

// field reads the line b[start:end].
func (s *Stream) field(b []byte, start, end int) {
	if start == end {
		s.dispatch(b)
		return
	}
	if b[start] == ':' {
		return // a comment
	}
	nameEnd, value := end, end
	if i := bytes.IndexByte(b[start:end], ':'); i >= 0 {
		nameEnd, value = start+i, start+i+1
		if value < end && b[value] == ' ' {
			value++
		}
	}
	switch string(b[start:nameEnd]) {
	case "event":
		s.name = span{value, end}
		s.renamed = s.dataLines > 0
		if class, dialect := nameClass(b[value:end]); class == classToken {
			s.decide(StreamToken, s.pos, dialect)
		}
	case "data":
		s.dataLine(b, value, end)
	}
}

// dataLine reads the value b[start:end] of a data line. The first line of
// an event is read at once (a token is decided there); the lines after it
// are joined, and the whole read at dispatch.
func (s *Stream) dataLine(b []byte, start, end int) {
	s.dataLines++
	switch s.dataLines {
	case 1:
		s.data = span{start, end}
		s.class, s.classOf = eventOf(b[s.name.start:s.name.end], b[start:end])
		if s.class == classToken {
			s.decide(StreamToken, s.pos, s.classOf)
		}
		return
	case 2:
		s.joined = append(s.joined[:0], b[s.data.start:s.data.end]...)
	}
	s.joined = append(s.joined, '\n')
	s.joined = append(s.joined, b[start:end]...)
}

// dispatch ends the event being read, at a blank line.
func (s *Stream) dispatch(b []byte) {
	name, data := b[s.name.start:s.name.end], b[s.data.start:s.data.end]
	lines, renamed, class, dialect := s.dataLines, s.renamed, s.class, s.classOf
	s.name, s.data, s.dataLines, s.renamed = span{}, span{}, 0, false
	if lines == 0 {
		return
	}
	if lines > 1 {
		data = s.joined
	}
	if lines > 1 || renamed {
		class, dialect = eventOf(name, data)
	}
	switch class {
	case classToken, classUndecided: // data that is not whole JSON: in doubt, a token
		s.decide(StreamToken, s.pos, dialect)
	case classDone:
		s.decide(StreamEnded, s.pos, dialect)
	case classError:
		v, ok := readError(data)
		if !ok && string(name) == "error" { // the SDKs fail on any error event
			v, ok = StreamVerdict{Type: "error", Payload: data}, true
		}
		if ok {
			s.decideError(v)
		}
	case classOpening:
		if dialect != "" {
			s.dialect = dialect
		}
	}
}

// decideError decides the error v read (its Type, Status, Payload and
// Dialect), at pos.
func (s *Stream) decideError(v StreamVerdict) {
	s.decide(StreamError, s.pos, v.Dialect)
	s.verdict.Type, s.verdict.Status, s.verdict.Payload = v.Type, v.Status, v.Payload
}

// jsonDepth follows a bare JSON value's brackets, outside its strings.
type jsonDepth struct {
	start, depth     int
	inString, escape bool
}

// jsonValue reads a body that is one JSON value (modeJSON) up to the end
// of that value: an error envelope is an error, anything else a token, as
// a body that is not SSE is handed over.
func (s *Stream) jsonValue(b []byte) {
	j := &s.json
	for ; s.pos < len(b); s.pos++ {
		switch c := b[s.pos]; {
		case j.escape:
			j.escape = false
		case j.inString:
			j.escape = c == '\\'
			j.inString = c != '"'
		case c == '"':
			j.inString = true
		case c == '{' || c == '[':
			j.depth++
		case c == '}' || c == ']':
			if j.depth--; j.depth > 0 {
				continue
			}
			s.pos++
			if v, ok := readError(b[j.start:s.pos]); ok {
				s.decideError(v)
			} else {
				s.decide(StreamToken, s.pos, "")
			}
			return
		}
	}
}

// eventClass is what one event says of the stream.
type eventClass uint8

const (
	classUnknown   eventClass = iota // the name says nothing: read the data
	classOpening                     // no output: an opening, a keep-alive, a closing
	classToken                       // output
	classError                       // an error, or one if its data holds one (response.failed)
	classDone                        // data [DONE]: the stream ends
	classUndecided                   // data that is not whole JSON yet
)

// eventOf is what an event says: what its name says when a dialect knows
// the name, else what its data says.
func eventOf(name, data []byte) (eventClass, string) {
	if class, dialect := nameClass(name); class != classUnknown {
		return class, dialect
	}
	return dataClass(data)
}

// nameClass is what an event's name (or its data's type) says;
// classUnknown for a name no dialect uses.
func nameClass(name []byte) (eventClass, string) {
	switch string(name) {
	case "message_start", "content_block_start", "ping", "content_block_stop", "message_delta", "message_stop":
		return classOpening, DialectAnthropic
	case "content_block_delta":
		return classToken, DialectAnthropic
	case "error":
		return classError, ""
	case "response.failed":
		return classError, DialectResponses
	case "response.created", "response.queued", "response.completed", "response.incomplete":
		return classOpening, DialectResponses
	}
	if !hasPrefix(name, "response.") {
		return classUnknown, ""
	}
	for _, opening := range [...]string{".added", ".in_progress", ".searching", ".generating", ".interpreting"} {
		if hasSuffix(name, opening) {
			return classOpening, DialectResponses
		}
	}
	return classToken, DialectResponses // in doubt, a token: the stream is handed over
}

// dataClass is what an event's data says: blank data nothing, [DONE] the
// end, data that is not a JSON object a token; of an object, its error,
// type, choices (OpenAI Chat) or candidates (Gemini); and any other object
// a token.
func dataClass(data []byte) (eventClass, string) {
	s := scanner{b: data}
	s.space()
	switch {
	case s.i == len(data):
		return classOpening, ""
	case hasPrefix(data[s.i:], "[DONE]"):
		return classDone, ""
	case data[s.i] != '{':
		return classToken, ""
	}
	var d eventData
	if !d.read(&s) {
		return classUndecided, ""
	}
	if d.err {
		return classError, ""
	}
	if class, dialect := nameClass(d.typ); class != classUnknown {
		return class, dialect
	}
	switch {
	case d.choices && !d.token:
		return classOpening, DialectChat
	case d.choices:
		return classToken, DialectChat
	case d.candidates && d.token:
		return classToken, DialectGemini
	case d.candidates || d.gemini:
		return classOpening, DialectGemini
	}
	return classToken, ""
}

// eventData is what the reader takes from an event's JSON data.
type eventData struct {
	typ        []byte // the top-level "type", raw
	err        bool   // a top-level "error" object
	choices    bool   // a "choices" array (OpenAI Chat)
	candidates bool   // a "candidates" array (Gemini)
	gemini     bool   // usageMetadata or promptFeedback
	token      bool   // a choice or a candidate carries output
}

// read reads the object at s into d, and reports whether it read it whole.
func (d *eventData) read(s *scanner) bool {
	return s.members(func(key []byte) bool {
		switch string(key) {
		case "type":
			if s.peek() == '"' {
				d.typ, _ = s.str()
				return true
			}
		case "error":
			d.err = d.err || s.peek() == '{'
		case "choices":
			if s.peek() == '[' {
				d.choices = true
				d.token = s.choicesToken() || d.token
				return true
			}
		case "candidates":
			if s.peek() == '[' {
				d.candidates = true
				d.token = s.candidatesToken() || d.token
				return true
			}
		case "usageMetadata", "promptFeedback":
			d.gemini = true
		}
		return false
	})
}

// choicesToken reads OpenAI's choices and reports whether one carries
// output: a member of its delta other than role that holds something
// (content, refusal, tool_calls...), or a text (legacy Completions) that
// does.
func (s *scanner) choicesToken() bool {
	token := false
	whole := s.elements(func() bool {
		return s.members(func(key []byte) bool {
			switch string(key) {
			case "delta":
				if s.peek() != '{' {
					return false
				}
				if !s.members(func(key []byte) bool {
					if string(key) == "role" {
						return false
					}
					token = s.nonEmpty() || token
					return true
				}) {
					s.fail()
				}
				return true
			case "text":
				token = s.nonEmpty() || token
				return true
			}
			return false
		})
	})
	if !whole {
		s.fail()
	}
	return token
}

// candidatesToken reads Gemini's candidates and reports whether one
// carries output: a content whose parts are not empty.
func (s *scanner) candidatesToken() bool {
	token := false
	whole := s.elements(func() bool {
		return s.members(func(key []byte) bool {
			if string(key) != "content" || s.peek() != '{' {
				return false
			}
			if !s.members(func(key []byte) bool {
				if string(key) != "parts" {
					return false
				}
				token = s.nonEmpty() || token
				return true
			}) {
				s.fail()
			}
			return true
		})
	})
	if !whole {
		s.fail()
	}
	return token
}

// members reads an object as object does, and reports whether it read it
// whole. A read of f's that fails calls fail, which ends the scan.
func (s *scanner) members(f func(key []byte) bool) bool {
	if s.peek() != '{' {
		return false
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		key, ok := s.str()
		if !ok || s.peek() != ':' {
			return false
		}
		s.i++
		if !f(key) && !s.skip() {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// elements reads an array, calling f at each element to read it, and
// reports whether it read the array whole.
func (s *scanner) elements(f func() bool) bool {
	if s.peek() != '[' {
		return false
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		return true
	}
	for {
		if !f() {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// nonEmpty reads a value and reports whether it holds something: a
// string, an array or an object that is not empty. Null, a number or a
// boolean holds nothing.
func (s *scanner) nonEmpty() bool {
	switch s.peek() {
	case '"':
		v, _ := s.str()
		return len(v) > 0
	case '[', '{':
		open := s.i
		s.i++
		c := s.peek()
		s.i = open
		if !s.skipNested() {
			s.fail()
		}
		return c != ']' && c != '}'
	}
	if !s.skip() {
		s.fail()
	}
	return false
}

// fail ends the scan: every read after it fails.
func (s *scanner) fail() { s.i = len(s.b) }

// readError reads an error event's data, or a bare JSON body: its error
// object's type and status, the envelope ErrorBody reads and the dialect
// its shape is. ok is false when it holds no error object (a
// response.failed whose error is null). It runs once a stream, if ever:
// encoding/json is plenty.
func readError(data []byte) (v StreamVerdict, ok bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return v, false
	}
	var e map[string]json.RawMessage
	v.Payload = data
	switch typ := jsonString(top["type"]); {
	case typ == "response.failed":
		var r struct {
			Error map[string]json.RawMessage `json:"error"`
		}
		if json.Unmarshal(top["response"], &r) != nil || r.Error == nil {
			return v, false
		}
		e, v.Payload, v.Dialect = r.Error, top["response"], DialectResponses
	case json.Unmarshal(top["error"], &e) == nil && e != nil:
		v.Dialect = envelopeDialect(typ, top, e)
	case typ == "error": // Responses' error event as documented: its fields at the top
		e, v.Dialect = top, DialectResponses
		delete(e, "type")
		v.Payload = append(append([]byte(`{"error":`), data...), '}')
	default:
		return v, false
	}
	v.Type, v.Status = errorKind(e)
	return v, true
}

// envelopeDialect is the dialect of an {"error": e} envelope whose
// top-level type is typ: Anthropic's and Responses' say "error" (Responses'
// with a sequence_number), Gemini's error has a numeric code and a status.
func envelopeDialect(typ string, top, e map[string]json.RawMessage) string {
	switch {
	case typ == "error" && top["sequence_number"] != nil:
		return DialectResponses
	case typ == "error":
		return DialectAnthropic
	case httpStatus(e["code"]) != 0 || jsonString(e["status"]) != "":
		return DialectGemini
	}
	return DialectChat
}

// errorKind reads an error object: its type, the first of code, type and
// status that is a machine string ("error" when none is), and the HTTP
// status it stands for: its code or status when that is one, else the
// first of them errorStatus knows.
func errorKind(e map[string]json.RawMessage) (typ string, status int) {
	status = httpStatus(e["code"])
	if status == 0 {
		status = httpStatus(e["status"])
	}
	for _, name := range [...]string{machineString(e["code"]), machineString(e["type"]), machineString(e["status"])} {
		if name == "" {
			continue
		}
		if typ == "" {
			typ = name
		}
		if status == 0 {
			status = errorStatus(name)
		}
	}
	if typ == "" {
		typ = "error"
	}
	return typ, status
}

// errorStatus is the HTTP status a provider's error type or code stands
// for, 0 for one it does not know. Sources: Anthropic's HTTP errors page
// and anthropic-sdk-go's ErrorType; OpenAI's error codes page and
// openai-go's ResponseErrorCode; google.rpc.Code's HTTP mapping.
func errorStatus(name string) int {
	switch name {
	case "invalid_request_error", "invalid_prompt",
		"INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return 400
	case "authentication_error", "invalid_api_key", "UNAUTHENTICATED":
		return 401
	case "billing_error":
		return 402
	case "permission_error", "PERMISSION_DENIED":
		return 403
	case "not_found_error", "NOT_FOUND":
		return 404
	case "ABORTED", "ALREADY_EXISTS":
		return 409
	case "request_too_large":
		return 413
	case "rate_limit_error", "rate_limit_exceeded", "insufficient_quota", "credit_balance_exhausted",
		"slow_down", "tokens", "requests", "RESOURCE_EXHAUSTED":
		return 429
	case "CANCELLED":
		return 499
	case "api_error", "server_error", "UNKNOWN", "INTERNAL", "DATA_LOSS":
		return 500
	case "UNIMPLEMENTED":
		return 501
	case "server_is_overloaded", "service_unavailable_error", "UNAVAILABLE":
		return 503
	case "timeout_error", "DEADLINE_EXCEEDED":
		return 504
	case "overloaded_error":
		return 529
	}
	return 0
}

// httpStatus is raw as an HTTP error status, 400 to 599, when it is a
// number or a string of one; 0 otherwise.
func httpStatus(raw json.RawMessage) int {
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return 0
	}
	i, err := n.Int64()
	if err != nil || i < 400 || i > 599 {
		return 0
	}
	return int(i)
}

// machineString is raw's string when it is 1 to 64 letters, digits, '_',
// '.' or '-' ("overloaded_error", "UNAVAILABLE"), "" otherwise: never a
// message.
func machineString(raw json.RawMessage) string {
	s := jsonString(raw)
	if len(s) > 64 {
		return ""
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '.', c == '-':
		default:
			return ""
		}
	}
	return s
}

// jsonString is raw's string, "" when raw is not one.
func jsonString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

func hasPrefix(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

func hasSuffix(b []byte, suffix string) bool {
	return len(b) >= len(suffix) && string(b[len(b)-len(suffix):]) == suffix
}
