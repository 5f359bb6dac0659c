package job

import "fmt"

// Class is a job's priority class. Inside each provider's lane the classes wait apart, and the
// provider's in-flight slots and token bucket serve transactional jobs first: a campaign of
// bulk jobs never delays a password reset, while bulk still gets a guaranteed share of the
// provider while both have work.
type Class string

const (
	// ClassTransactional is a push a person waits for (a login code, a reply). It is the
	// default, so a job that names no class behaves as jobs always did.
	ClassTransactional Class = "transactional"
	// ClassBulk is a push nobody waits for to the second (a newsletter, a campaign): it gets
	// what transactional jobs leave of the provider, and never less than the provider's
	// bulk_min_share while both classes have work.
	ClassBulk Class = "bulk"
)

// Classes are the classes in the order a provider serves them.
var Classes = []Class{ClassTransactional, ClassBulk}

// ParseClass is the class named s, or an error that lists the classes.
func ParseClass(s string) (Class, error) {
	switch Class(s) {
	case ClassTransactional, ClassBulk:
		return Class(s), nil
	}
	if len(s) > 32 {
		return "", fmt.Errorf("must be %q or %q, got a string of %d bytes", ClassTransactional, ClassBulk, len(s))
	}
	return "", fmt.Errorf("must be %q or %q, got %q", ClassTransactional, ClassBulk, s)
}

// IsBulk says whether c is ClassBulk.
func (c Class) IsBulk() bool { return c == ClassBulk }
