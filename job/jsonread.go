package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON readers of Decode: strict about shape, precise in their reasons, and careful to
// echo nothing of the input but field names and numbers.

// member is one member of a JSON object: its raw value, a slice of the entry, and the offset
// in the entry where that value starts (for reasons that point at a byte).
type member struct {
	raw json.RawMessage
	at  int
}

// members are an object's members by name.
type members map[string]member

// splitObject reads one JSON object into its members, refusing trailing data, duplicate names
// and names not in allowed. A JSON null member is treated as absent. at is where raw starts in
// the entry; path prefixes reasons.
func splitObject(raw []byte, at int, path string, allowed []string) (members, error) {
	// A nested object (path != "") is a member of one split already, so it is valid JSON.
	if out, ok := splitValidObject(raw, at, allowed, path == ""); ok {
		return out, nil
	}
	return splitObjectSlow(raw, at, path, allowed)
}

// splitValidObject is splitObject's fast path, for the jobs that are well-formed: json.Valid,
// then one scan for the members, with none of the Decoder's per-token work (a third of a
// worker's CPU went to reading jobs before it). It gives up (false) on anything that needs a
// reason or a closer look, escapes in a name included, and splitObjectSlow says what is wrong;
// where it succeeds the two agree, which TestSplitObjectPathsAgree checks.
func splitValidObject(raw []byte, at int, allowed []string, validate bool) (members, bool) {
	if validate && !json.Valid(raw) {
		return nil, false
	}
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	// A job has a handful of members: a hint of at most 8 keeps the map in one small group.
	out := make(members, min(len(allowed), 8))
	// Bit k: allowed[k] was met. The allowed lists are short.
	var seen uint64
	if len(allowed) > 64 {
		return nil, false
	}
	i = skipSpace(raw, i+1)
	for i < len(raw) && raw[i] != '}' {
		// A name: json.Valid vouches for the quotes; a backslash needs unescaping.
		end := bytes.IndexByte(raw[i+1:], '"')
		name := raw[i+1 : i+1+end]
		if bytes.IndexByte(name, '\\') >= 0 {
			return nil, false
		}
		k := index(allowed, string(name))
		if k < 0 || seen&(1<<k) != 0 {
			return nil, false
		}
		seen |= 1 << k
		i = skipSpace(raw, i+1+end+1)
		i = skipSpace(raw, i+1) // the colon
		j := valueEnd(raw, i)
		if v := raw[i:j]; !bytes.Equal(v, []byte("null")) {
			out[allowed[k]] = member{raw: json.RawMessage(v), at: at + i}
		}
		i = skipSpace(raw, j)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return out, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd is the index just past the JSON value starting at b[i], in a document json.Valid
// accepted.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// stringEnd is the index just past the string whose opening quote is b[i].
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

func index(list []string, s string) int {
	for k, v := range list {
		if v == s {
			return k
		}
	}
	return -1
}

// splitObjectSlow is splitObject token by token: it finds and words every problem.
func splitObjectSlow(raw []byte, at int, path string, allowed []string) (members, error) {
	where := "job"
	if path != "" {
		where = path
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, invalid("%s: %s", where, jsonProblem(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, invalid("%s: must be a JSON object, got %s", where, jsonKind(tok))
	}
	out := members{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalid("%s: %s", where, jsonProblem(err))
		}
		name, _ := tok.(string)
		if !contains(allowed, name) {
			return nil, invalid("%sunknown field %q", prefix(path), cut(name, 64))
		}
		if seen[name] {
			return nil, invalid("%sduplicate field %q", prefix(path), name)
		}
		seen[name] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, invalid("%s: %s", where, jsonProblem(err))
		}
		if !bytes.Equal(v, []byte("null")) {
			// The decoder stops right after the value, which it copied byte for byte: the
			// member is that slice of raw, as on the fast path.
			end := int(dec.InputOffset())
			out[name] = member{raw: json.RawMessage(raw[end-len(v) : end]), at: at + end - len(v)}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, invalid("%s: %s", where, jsonProblem(err))
	}
	if path == "" {
		if _, err := dec.Token(); err != io.EOF {
			return nil, invalid("job: unexpected data after the JSON object")
		}
	}
	return out, nil
}

func prefix(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}

// jsonProblem turns a decoder error into a reason without echoing input beyond one character.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "not valid JSON: unexpected end of input"
	default:
		return "not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")
	}
}

func jsonKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return "a delimiter"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "something else"
}

// kindOf names the JSON type of a raw value for reasons.
func kindOf(raw json.RawMessage) string {
	switch b := bytes.TrimSpace(raw); {
	case len(b) == 0:
		return "nothing"
	case b[0] == '"':
		return "a string"
	case b[0] == '{':
		return "an object"
	case b[0] == '[':
		return "an array"
	case b[0] == 't' || b[0] == 'f':
		return "a boolean"
	case b[0] == 'n':
		return "null"
	default:
		return "a number"
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// jsonString decodes a JSON string value. A string with no escapes, no control bytes and valid
// UTF-8 is its bytes between the quotes, which is what nearly every job holds; anything else
// goes through encoding/json, which unescapes it. A string that is not valid UTF-8 (a byte that
// starts no UTF-8 sequence, or a \u escape of half a UTF-16 surrogate pair) is refused with a
// *notUTF8Error: encoding/json would put U+FFFD in its place and change the text silently.
func jsonString(raw []byte, dst *string) error {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
		in := raw[1 : n-1]
		plain := utf8.Valid(in)
		for _, c := range in {
			if c == '\\' || c == '"' || c < 0x20 {
				plain = false
				break
			}
		}
		if plain {
			*dst = string(in)
			return nil
		}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	// Only a replacement character in the result can be one encoding/json put there.
	if strings.ContainsRune(s, utf8.RuneError) {
		if at := firstNotUTF8(raw); at >= 0 {
			return &notUTF8Error{at: at}
		}
	}
	*dst = s
	return nil
}

// notUTF8Error says where a JSON string stops being valid UTF-8: the offset, in the string's
// raw JSON (opening quote at 0), of the first byte that is not, or of the backslash of the
// first escaped lone surrogate.
type notUTF8Error struct{ at int }

func (e *notUTF8Error) Error() string { return fmt.Sprintf("not valid UTF-8 at byte %d", e.at) }

// firstNotUTF8 returns the offset in raw, a JSON string encoding/json decodes, of the first
// byte encoding/json would replace with U+FFFD, or -1. Those are the bytes that start no valid
// UTF-8 sequence and the \u escapes of a surrogate that is not the high half of a pair whose
// low half is escaped right after it (how encoding/json pairs them).
func firstNotUTF8(raw []byte) int {
	end := len(raw) - 1 // the closing quote
	for i := 1; i < end; {
		switch c := raw[i]; {
		case c == '\\' && raw[i+1] == 'u':
			r := hex4(raw[i+2 : i+6])
			if !utf16.IsSurrogate(r) {
				i += 6
				continue
			}
			if r < 0xdc00 && i+12 <= end && raw[i+6] == '\\' && raw[i+7] == 'u' {
				if low := hex4(raw[i+8 : i+12]); low >= 0xdc00 && low <= 0xdfff {
					i += 12
					continue
				}
			}
			return i
		case c == '\\':
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:end])
			if r == utf8.RuneError && n == 1 {
				return i
			}
			i += n
		}
	}
	return -1
}

// hex4 reads the four hex digits of a \u escape encoding/json already accepted.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// stringOf reads a member that must be a string; field names it in reasons.
func stringOf(m member, field string) (string, error) {
	var s string
	if kindOf(m.raw) != "a string" {
		return "", invalid("%s: must be a string, got %s", field, kindOf(m.raw))
	}
	if err := jsonString(m.raw, &s); err != nil {
		var bad *notUTF8Error
		if errors.As(err, &bad) {
			return "", invalid("%s: not valid UTF-8 at byte %d", field, m.at+bad.at)
		}
		return "", invalid("%s: must be a string, got %s", field, kindOf(m.raw))
	}
	return s, nil
}

func requiredString(fields members, name string) (string, error) {
	s, ok, err := optionalString(fields, name)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", invalid("%s: required", name)
	}
	return s, nil
}

func optionalString(fields members, name string) (string, bool, error) {
	m, ok := fields[name]
	if !ok {
		return "", false, nil
	}
	s, err := stringOf(m, name)
	return s, err == nil, err
}
