package job

import (
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

// member is one member of a JSON object: its raw value, a substring of the entry, and the
// offset in the entry where that value starts (for reasons that point at a byte).
type member struct {
	raw string
	at  int
}

// maxMembers bounds the allowed lists splitObject takes (jobFields is the longest).
const maxMembers = 16

// members are an object's members, each at the place of its name in the list the object was
// split by. An absent member (or a JSON null) has an empty raw: a present value is never empty.
// No map: a job's handful of members are found by a scan of a short list.
type members struct {
	allowed []string
	vals    [maxMembers]member
}

// get returns the member named name, which must be in the allowed list.
func (ms *members) get(name string) (member, bool) {
	m := ms.vals[index(ms.allowed, name)]
	return m, m.raw != ""
}

// set keeps the member at place k of the allowed list.
func (ms *members) set(k int, m member) { ms.vals[k] = m }

// splitObject reads one JSON object into its members, refusing trailing data, duplicate names
// and names not in allowed. A JSON null member is treated as absent. at is where raw starts in
// the entry; path prefixes reasons.
func splitObject(raw string, at int, path string, allowed []string) (members, error) {
	// A nested object (path != "") is a member of one split already, so it is valid JSON.
	if out, ok := splitValidObject(raw, at, allowed, path == ""); ok {
		return out, nil
	}
	return splitObjectSlow(raw, at, path, allowed)
}

// splitValidObject is splitObject's fast path, for the objects that are well-formed: one scan
// that finds the members and, when validate is set, checks the JSON grammar of their values
// (what json.Valid accepts), with none of the Decoder's per-token work. Without validate the
// values are taken to be valid JSON already and only skipped. It gives up (false) on anything
// that needs a reason or a closer look, escapes in a name or nesting deeper than maxScanDepth
// included, and splitObjectSlow says what is wrong; where it succeeds the two agree and a
// validated raw is valid JSON, which TestSplitObjectPathsAgree and FuzzSplitObject check.
func splitValidObject(raw string, at int, allowed []string, validate bool) (members, bool) {
	out := members{allowed: allowed}
	if len(allowed) > maxMembers {
		return out, false
	}
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return out, false
	}
	// Bit k: allowed[k] was met.
	var seen uint64
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return out, skipSpace(raw, i+1) == len(raw)
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return out, false
		}
		end := scanString(raw, i)
		if end < 0 {
			return out, false
		}
		name := raw[i+1 : end-1]
		if strings.IndexByte(name, '\\') >= 0 {
			return out, false
		}
		k := index(allowed, name)
		if k < 0 || seen&(1<<k) != 0 {
			return out, false
		}
		seen |= 1 << k
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return out, false
		}
		i = skipSpace(raw, i+1)
		var j int
		if validate {
			j = scanValue(raw, i, 1)
		} else {
			j = skipValue(raw, i)
		}
		if j < 0 {
			return out, false
		}
		if v := raw[i:j]; v != "null" {
			out.set(k, member{raw: v, at: at + i})
		}
		i = skipSpace(raw, j)
		if i >= len(raw) {
			return out, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return out, skipSpace(raw, i+1) == len(raw)
		default:
			return out, false
		}
	}
}

// maxScanDepth is how deeply scanValue follows nested arrays and objects before it gives up
// and leaves the value to encoding/json. A job nests three deep.
const maxScanDepth = 64

// scanValue returns the index just past the JSON value that starts at s[i], or -1 when s[i:]
// starts with none (or with one nested deeper than maxScanDepth). It accepts exactly the
// grammar of RFC 8259 that json.Valid does; like json.Valid it leaves UTF-8 to the string
// readers.
func scanValue(s string, i, depth int) int {
	if i >= len(s) {
		return -1
	}
	switch c := s[i]; {
	case c == '"':
		return scanString(s, i)
	case c == '{' || c == '[':
		if depth > maxScanDepth {
			return -1
		}
		return scanContainer(s, i, depth)
	case c == 't':
		return scanLiteral(s, i, "true")
	case c == 'f':
		return scanLiteral(s, i, "false")
	case c == 'n':
		return scanLiteral(s, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return scanNumber(s, i)
	}
	return -1
}

// scanContainer scans the object or array that opens at s[i].
func scanContainer(s string, i, depth int) int {
	object := s[i] == '{'
	closing := byte(']')
	if object {
		closing = '}'
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == closing {
		return i + 1
	}
	for {
		if object {
			if i >= len(s) || s[i] != '"' {
				return -1
			}
			if i = scanString(s, i); i < 0 {
				return -1
			}
			i = skipSpace(s, i)
			if i >= len(s) || s[i] != ':' {
				return -1
			}
			i = skipSpace(s, i+1)
		}
		if i = scanValue(s, i, depth+1); i < 0 {
			return -1
		}
		i = skipSpace(s, i)
		if i >= len(s) {
			return -1
		}
		switch s[i] {
		case ',':
			i = skipSpace(s, i+1)
		case closing:
			return i + 1
		default:
			return -1
		}
	}
}

// plainByte are the bytes that stand for themselves in a JSON string: all but the quote, the
// backslash and the control bytes.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// plainPrefix is how many of the first bytes of s are plainByte. It looks at eight at a time
// while none of them is a quote, a backslash or a control byte: a job's strings are mostly long
// runs of plain text (an endpoint, keys, a payload).
func plainPrefix(s string) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		// (x-ones*0x20)&^x&highs is not zero exactly when a byte of x is below 0x20, and
		// (q-ones)&^q&highs when a byte of q is zero: a quote in x; b likewise for a backslash.
		// (A borrow may mark a later byte too, but only after a byte that is marked rightly.)
		q, b := x^(ones*'"'), x^(ones*'\\')
		if ((x-ones*0x20)&^x|(q-ones)&^q|(b-ones)&^b)&highs != 0 {
			break
		}
	}
	for i < len(s) && plainByte[s[i]] {
		i++
	}
	return i
}

// scanString scans the string whose opening quote is s[i]: no control bytes, and only the
// escapes JSON has.
func scanString(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		j += plainPrefix(s[j:])
		if j >= len(s) {
			break
		}
		switch c := s[j]; {
		case c == '"':
			return j + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if j+1 >= len(s) {
				return -1
			}
			switch s[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if j+6 > len(s) || !isHex(s[j+2]) || !isHex(s[j+3]) || !isHex(s[j+4]) || !isHex(s[j+5]) {
					return -1
				}
				j += 5
			default:
				return -1
			}
		}
	}
	return -1
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// scanNumber scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at s[i].
func scanNumber(s string, i int) int {
	if s[i] == '-' {
		i++
	}
	switch {
	case i >= len(s) || !isDigit(s[i]):
		return -1
	case s[i] == '0':
		i++
	default:
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || !isDigit(s[i]) {
			return -1
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || !isDigit(s[i]) {
			return -1
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	return i
}

// skipValue returns the index just past the JSON value that starts at s[i], in a document
// scanValue accepted, or -1 when s ends first.
func skipValue(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	switch s[i] {
	case '"':
		return skipString(s, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				if j = skipString(s, j); j < 0 {
					return -1
				}
				j--
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(s) && s[j] != ',' && s[j] != '}' && s[j] != ']' && s[j] != ' ' && s[j] != '\t' && s[j] != '\n' && s[j] != '\r' {
		j++
	}
	return j
}

// skipString returns the index just past the string whose opening quote is s[i], in a
// document scanValue accepted: the first quote not escaped by an odd run of backslashes.
func skipString(s string, i int) int {
	for j := i + 1; j < len(s); {
		q := strings.IndexByte(s[j:], '"')
		if q < 0 {
			return -1
		}
		j += q
		k := j
		for k > i+1 && s[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j + 1
		}
		j++
	}
	return -1
}

func scanLiteral(s string, i int, lit string) int {
	if !strings.HasPrefix(s[i:], lit) {
		return -1
	}
	return i + len(lit)
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
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
func splitObjectSlow(raw string, at int, path string, allowed []string) (members, error) {
	out := members{allowed: allowed}
	if len(allowed) > maxMembers {
		panic("job: splitObject takes at most maxMembers names")
	}
	where := "job"
	if path != "" {
		where = path
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return out, invalid("%s: %s", where, jsonProblem(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return out, invalid("%s: must be a JSON object, got %s", where, jsonKind(tok))
	}
	var seen uint64 // bit k: allowed[k] was met
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out, invalid("%s: %s", where, jsonProblem(err))
		}
		name, _ := tok.(string)
		k := index(allowed, name)
		if k < 0 {
			return out, invalid("%sunknown field %q", prefix(path), cut(name, 64))
		}
		if seen&(1<<k) != 0 {
			return out, invalid("%sduplicate field %q", prefix(path), name)
		}
		seen |= 1 << k
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return out, invalid("%s: %s", where, jsonProblem(err))
		}
		if string(v) != "null" {
			// The decoder stops right after the value, which it copied byte for byte: the
			// member is that substring of raw, as on the fast path.
			end := int(dec.InputOffset())
			out.set(k, member{raw: raw[end-len(v) : end], at: at + end - len(v)})
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return out, invalid("%s: %s", where, jsonProblem(err))
	}
	if path == "" {
		if _, err := dec.Token(); err != io.EOF {
			return out, invalid("job: unexpected data after the JSON object")
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
func kindOf(raw string) string {
	switch b := strings.TrimSpace(raw); {
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
//
// The plain string is a substring of raw, sharing its memory: a decoded job holds on to its
// entry, which the lane keeps anyway.
func jsonString(raw string, dst *string) error {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
		if in := raw[1 : n-1]; plainPrefix(in) == len(in) && utf8.ValidString(in) {
			*dst = in
			return nil
		}
	}
	var s string
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
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
func firstNotUTF8(raw string) int {
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
			r, n := utf8.DecodeRuneInString(raw[i:end])
			if r == utf8.RuneError && n == 1 {
				return i
			}
			i += n
		}
	}
	return -1
}

// hex4 reads the four hex digits of a \u escape encoding/json already accepted.
func hex4(s string) rune {
	var r rune
	for i := 0; i < len(s); i++ {
		c := s[i]
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

func requiredString(fields *members, name string) (string, error) {
	s, ok, err := optionalString(fields, name)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", invalid("%s: required", name)
	}
	return s, nil
}

func optionalString(fields *members, name string) (string, bool, error) {
	m, ok := fields.get(name)
	if !ok {
		return "", false, nil
	}
	s, err := stringOf(m, name)
	return s, err == nil, err
}
