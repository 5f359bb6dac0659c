package taxonomy

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// maxDetail is the most an outcome's detail may hold, in bytes: enough for any provider's
	// reason line, small enough for every ledger entry and log line.
	maxDetail = 256
	// maxScan is how much of a body is looked at. Push services' error bodies are a few hundred
	// bytes; a larger one is an HTML error page or garbage, and its start says enough.
	maxScan = 16 << 10
	// workDetail bounds the cleaned text before URLs are cut, so that a URL straddling the
	// 256-byte mark is still recognised as one.
	workDetail = 4 * maxDetail
	// maxRawDetail bounds the raw text a detail is made from: even with runs of white space
	// collapsed, more than this never contributes to 256 bytes worth keeping.
	maxRawDetail = 4 * workDetail
)

// scanned returns the part of body the classifier looks at.
func scanned(body []byte) []byte {
	if len(body) > maxScan {
		return body[:maxScan]
	}
	return body
}

// cleanDetail makes s safe to store and log: the secrets of the endpoint become Redacted (first,
// while every secret is whole), runs of spaces and control or format characters (newlines,
// tabs, NUL, BOM, bidi overrides) become one space, invalid UTF-8 becomes U+FFFD, every URL is
// cut back to scheme and host, and the result is cut to maxDetail bytes on a rune boundary.
func cleanDetail(s string, secrets Secrets) string {
	s = secrets.Redact(s)
	if len(s) > maxRawDetail {
		s = s[:maxRawDetail]
	}
	var b strings.Builder
	b.Grow(min(len(s), workDetail+utf8.UTFMax))
	pending := false
	for _, r := range s { // an invalid byte ranges as utf8.RuneError, written back valid
		if isSeparator(r) {
			pending = b.Len() > 0
			continue
		}
		if b.Len() >= workDetail {
			break
		}
		if pending {
			b.WriteByte(' ')
			pending = false
		}
		b.WriteRune(r)
	}
	return cut(redactURLs(b.String()), maxDetail)
}

func isSeparator(r rune) bool {
	if r < utf8.RuneSelf {
		return r <= ' ' || r == 0x7f // the common case, without the Unicode tables
	}
	return unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// cut shortens s to at most n bytes without splitting a rune.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return strings.TrimRight(s[:i], " ")
}

// redactURLs keeps the scheme and host of every http(s) URL in s and replaces the rest with
// "/…". Services echo endpoints in their error text (FCM's 404 names one), and an endpoint's
// path is the subscription's credential. User information before the host goes too.
func redactURLs(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != 'h' && s[i] != 'H' {
			continue
		}
		n := schemeLen(s[i:])
		if n == 0 {
			continue
		}
		host := i + n
		end := host
		for end < len(s) && !urlEnd(s[end]) && s[end] != '/' && s[end] != '?' && s[end] != '#' {
			end++
		}
		rest := end
		for rest < len(s) && !urlEnd(s[rest]) {
			rest++
		}
		authority := s[host:end]
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			authority = authority[at+1:]
		}
		b.WriteString(s[last:host])
		b.WriteString(authority)
		if tail := s[end:rest]; tail != "" && tail != "/" {
			b.WriteString("/…")
		} else {
			b.WriteString(tail)
		}
		last = rest
		i = rest - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// schemeLen returns the length of a leading "http://" or "https://" (any case), or 0.
func schemeLen(s string) int {
	for _, p := range [...]string{"https://", "http://"} {
		if len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) {
			return len(p)
		}
	}
	return 0
}

// urlEnd reports whether c ends a URL in running text (after cleanDetail, no control
// characters are left).
func urlEnd(c byte) bool {
	switch c {
	case ' ', '"', '\'', '<', '>', '`', '\\':
		return true
	}
	return false
}

// firstLine returns the first line of text in body that is not blank, with HTML tags removed
// first when the body is a page: FCM's UnauthorizedRegistration answer is an HTML page whose
// first line is "<HTML>".
func firstLine(body []byte) string {
	text := plainText(scanned(body))
	for len(text) > 0 {
		line := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			return string(line)
		}
	}
	return ""
}

// plainText returns body with tags turned into line breaks when it looks like HTML or XML,
// and body itself otherwise.
func plainText(body []byte) []byte {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '<' {
		return body
	}
	out := make([]byte, 0, len(trimmed))
	inTag := false
	for _, c := range trimmed {
		switch {
		case c == '<':
			inTag = true
			out = append(out, '\n')
		case c == '>' && inTag:
			inTag = false
		case !inTag:
			out = append(out, c)
		}
	}
	return out
}

// isJSONObject reports whether body starts, after white space, like a JSON object: only then is
// it worth handing to encoding/json.
func isJSONObject(body []byte) bool {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '{'
}
