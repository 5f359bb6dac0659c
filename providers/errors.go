package providers

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinels callers match with errors.Is.
var (
	// ErrInvalid is wrapped by every *Error: the registry file is unreadable or breaks a rule.
	ErrInvalid = errors.New("providers: invalid registry")
	// ErrNotHTTPS: the endpoint's scheme is not https. Web Push is https only (RFC 8030 §8).
	ErrNotHTTPS = errors.New("providers: endpoint is not https")
	// ErrBadEndpoint: the endpoint is not a usable absolute URL (unparsable, no host, userinfo,
	// a host that is neither a DNS name nor an IP literal, a bad port).
	ErrBadEndpoint = errors.New("providers: bad endpoint")
)

// Error is one problem found in a registry file. Its text is "file:line: field: problem", the
// shape editors and CI annotations understand. Field is a path such as
// "providers[2].breaker.window"; it is empty for problems with the file as a whole.
type Error struct {
	File    string
	Line    int
	Field   string
	Problem string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Problem)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, e.Problem)
}

// Unwrap makes every registry problem match ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// Errors is every problem found in one file, in line order. Parse and Load return it (never an
// empty one) when the file breaks any rule; errors.As(err, &list) gets the items, and
// errors.As(err, &item) with item *Error gets the first.
type Errors []*Error

// Error prints one "file:line: field: problem" per line.
func (l Errors) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap exposes the items to errors.Is and errors.As.
func (l Errors) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}
