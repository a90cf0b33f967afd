package signal

// OutputCap returns the output cap a JSON request body asks for (R23): the
// largest of its top-level max_tokens (OpenAI's chat, Anthropic's),
// max_completion_tokens (OpenAI's reasoning models), max_output_tokens
// (OpenAI's Responses) and generationConfig.maxOutputTokens (Gemini's,
// also spelt generation_config.max_output_tokens); 0 when it asks for none.
// It reads b once, allocating nothing: a scanner that skips every value it
// does not need, so a 64 KiB prompt costs a pass over its bytes. A body cut
// short (the first 64 KiB of a longer one) gives what came before the cut;
// anything that is not JSON gives 0. It never panics.
func OutputCap(b []byte) int64 {
	s := scanner{b: b}
	var best int64
	s.object(func(key []byte) bool {
		switch string(key) {
		case "max_tokens", "max_completion_tokens", "max_output_tokens":
			return s.capInto(&best)
		case "generationConfig", "generation_config":
			if s.peek() == '{' {
				s.object(func(key []byte) bool {
					if string(key) == "maxOutputTokens" || string(key) == "max_output_tokens" {
						return s.capInto(&best)
					}
					return false
				})
				return true
			}
		}
		return false
	})
	return best
}

// capInto reads a cap's value into best when it is a number, and reports
// whether it read it. Any other value (null, as SDKs that marshal an unset
// field send it, a string, an object) is left to be skipped: read as a
// number, it would end the scan, and the caps after it would be lost.
func (s *scanner) capInto(best *int64) bool {
	if c := s.peek(); c != '-' && (c < '0' || c > '9') {
		return false
	}
	if n, ok := s.integer(); ok {
		*best = max(*best, n)
	}
	return true
}

// scanner reads JSON from b at i. Each read reports whether it found what
// JSON allows there; the first that does not ends the scan.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek is the next byte that is not space, 0 at the end.
func (s *scanner) peek() byte {
	s.space()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// object reads an object, calling f with each key when the scanner is at
// its value; f reads the value and returns true, or returns false to have
// it skipped. It stops at the end of the object, or at the first byte
// JSON does not allow there.
func (s *scanner) object(f func(key []byte) bool) {
	if s.peek() != '{' {
		return
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return
	}
	for {
		key, ok := s.str()
		if !ok || s.peek() != ':' {
			return
		}
		s.i++
		if !f(key) && !s.skip() {
			return
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return
		default:
			return
		}
	}
}

// str reads a string and returns its raw bytes (escapes left as they are:
// the keys looked for have none).
func (s *scanner) str() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	start := s.i + 1
	for i := start; i < len(s.b); i++ {
		switch s.b[i] {
		case '\\':
			i++
		case '"':
			s.i = i + 1
			return s.b[start:i], true
		}
	}
	s.i = len(s.b)
	return nil, false
}

// integer reads a number and returns it when it is a non-negative integer
// (saturating); a number of another form is read and not taken.
func (s *scanner) integer() (int64, bool) {
	s.space()
	start := s.i
	for s.i < len(s.b) && (s.b[s.i] >= '0' && s.b[s.i] <= '9' || s.b[s.i] == '-' || s.b[s.i] == '+' ||
		s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
	}
	// Saturating at 2^62: a cap past it means "a lot", and the input
	// tokens added to it still fit an int64. n <= most/10 before a digit
	// leaves n*10 + 9 at most most+9, which min brings back.
	const most = 1 << 62
	var n int64
	for _, c := range s.b[start:s.i] {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > most/10 {
			n = most
			continue
		}
		n = min(n*10+int64(c-'0'), most)
	}
	return n, s.i > start && s.i < len(s.b) // a number cut by the end of b may be cut short
}

// skip reads one value of any kind.
func (s *scanner) skip() bool {
	switch c := s.peek(); c {
	case '"':
		_, ok := s.str()
		return ok
	case '{', '[':
		return s.skipNested()
	case 0:
		return false
	default:
		start := s.i
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return s.i > start
			}
			s.i++
		}
		return false
	}
}

// skipNested reads an object or an array whole, at any depth, counting
// brackets outside strings.
func (s *scanner) skipNested() bool {
	depth := 0
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			if _, ok := s.str(); !ok {
				return false
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				s.i++
				return true
			}
		}
		s.i++
	}
	return false
}
