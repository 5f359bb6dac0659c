package stream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The JSON readers of DecodeJob: strict about shape, precise in their reasons, and careful to
// echo nothing of the input but field names and numbers.

// splitObject reads one JSON object into its members, refusing trailing data, duplicate names
// and names not in allowed. A JSON null member is treated as absent. path prefixes reasons.
func splitObject(raw []byte, path string, allowed []string) (map[string]json.RawMessage, error) {
	// A nested object (path != "") is a member of one split already, so it is valid JSON.
	if out, ok := splitValidObject(raw, allowed, path == ""); ok {
		return out, nil
	}
	return splitObjectSlow(raw, path, allowed)
}

// splitValidObject is splitObject's fast path, for the jobs that are well-formed: json.Valid,
// then one scan for the members, with none of the Decoder's per-token work (a third of a
// worker's CPU went to reading jobs before it). It gives up (false) on anything that needs a
// reason or a closer look, escapes in a name included, and splitObjectSlow says what is wrong;
// where it succeeds the two agree, which TestSplitObjectPathsAgree checks.
func splitValidObject(raw []byte, allowed []string, validate bool) (map[string]json.RawMessage, bool) {
	if validate && !json.Valid(raw) {
		return nil, false
	}
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	// A job has a handful of members: a hint of at most 8 keeps the map in one small group.
	out := make(map[string]json.RawMessage, min(len(allowed), 8))
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
			out[allowed[k]] = json.RawMessage(v)
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
func splitObjectSlow(raw []byte, path string, allowed []string) (map[string]json.RawMessage, error) {
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
	out := map[string]json.RawMessage{}
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
			out[name] = v
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

// decodeBase64 accepts standard and URL-safe base64, padded or not: upstreams in other
// languages produce all four, and none of them is ambiguous.
func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// wholeNumber reads a JSON number with an integral value (1000 and 1e3 alike).
func wholeNumber(raw json.RawMessage) (int64, error) {
	if kindOf(raw) != "a number" {
		return 0, fmt.Errorf("must be a whole number, got %s", kindOf(raw))
	}
	s := string(bytes.TrimSpace(raw))
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("must be a whole number, got %s", cut(s, 32))
	}
	return int64(f), nil
}

// wholeOrFraction reads a JSON number, dropping a fraction (a DOMHighResTimeStamp may have one).
func wholeOrFraction(raw json.RawMessage) (int64, error) {
	if kindOf(raw) != "a number" {
		return 0, fmt.Errorf("must be a number or null, got %s", kindOf(raw))
	}
	s := string(bytes.TrimSpace(raw))
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("must be a number of milliseconds, got %s", cut(s, 32))
	}
	return int64(f), nil
}

// decodeTime reads an RFC 3339 string or a number of unix milliseconds.
func decodeTime(raw json.RawMessage) (time.Time, error) {
	switch kindOf(raw) {
	case "a string":
		var s string
		if err := jsonString(raw, &s); err != nil {
			return time.Time{}, errors.New("must be an RFC 3339 time or unix milliseconds")
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}, errors.New("must be an RFC 3339 time (2006-01-02T15:04:05Z) or unix milliseconds")
		}
		return t, nil
	case "a number":
		n, err := wholeNumber(raw)
		if err != nil {
			return time.Time{}, errors.New("unix milliseconds must be a whole number")
		}
		if n < 0 {
			return time.Time{}, fmt.Errorf("unix milliseconds must be at least 0, got %d", n)
		}
		return time.UnixMilli(n), nil
	default:
		return time.Time{}, fmt.Errorf("must be an RFC 3339 time or unix milliseconds, got %s", kindOf(raw))
	}
}

// jsonString decodes a JSON string value. A string with no escapes, no control bytes and valid
// UTF-8 is its bytes between the quotes, which is what nearly every job holds; anything else
// goes through encoding/json (which unescapes, and turns bad UTF-8 into U+FFFD).
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
	return json.Unmarshal(raw, dst)
}

func requiredString(fields map[string]json.RawMessage, name string) (string, error) {
	s, ok, err := optionalString(fields, name)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", invalid("%s: required", name)
	}
	return s, nil
}

func optionalString(fields map[string]json.RawMessage, name string) (string, bool, error) {
	raw, ok := fields[name]
	if !ok {
		return "", false, nil
	}
	var s string
	if kindOf(raw) != "a string" || jsonString(raw, &s) != nil {
		return "", false, invalid("%s: must be a string, got %s", name, kindOf(raw))
	}
	return s, true, nil
}
