package job

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/webpush-gateway/webpush-gateway/ece"
	"github.com/webpush-gateway/webpush-gateway/providers"
)

// The rules of a push message that a job must keep and that the adapter checks again on the
// message it sends (a Message need not come from a job: `gateway-worker send` builds one from
// flags). One set of numbers and checks serves both.
const (
	// MaxEndpointLen is the longest subscription endpoint: the bound providers.Resolve keeps.
	MaxEndpointLen = providers.MaxEndpointLen
	// MaxBody is the aes128gcm body every push service takes: 4096 bytes (RFC 8030 section
	// 7.2).
	MaxBody = ece.MaxBodySize
	// MaxBodyWNS is the larger body WNS takes: 5000 bytes.
	MaxBodyWNS = 5000
	// MaxCiphertext is the largest pre-encrypted body a job may carry: the largest any push
	// service takes (WNS's). The adapter refuses one over its own provider's limit.
	MaxCiphertext = MaxBodyWNS
	// MaxPayload is the largest plaintext payload: what fits one MaxBody-byte aes128gcm body
	// (3993 bytes).
	MaxPayload = ece.MaxPlaintext
	// MaxTopicLen is the longest Topic (RFC 8030 section 5.4).
	MaxTopicLen = 32
)

// Urgencies are the values of the Urgency header (RFC 8030 section 5.3), lowest first.
var Urgencies = []string{"very-low", "low", "normal", "high"}

var errUrgency = errors.New("must be one of " + strings.Join(Urgencies, ", "))

// CheckUrgency accepts one of Urgencies. (No urgency at all is a job or a message without
// one, which the callers tell apart.)
func CheckUrgency(u string) error {
	if !slices.Contains(Urgencies, u) {
		return errUrgency
	}
	return nil
}

var errTopic = fmt.Errorf("must be 1 to %d characters of the URL-safe base64 alphabet", MaxTopicLen)

// CheckTopic accepts a Topic of 1 to MaxTopicLen characters of the URL-safe base64 alphabet
// (RFC 8030 section 5.4). Apple refuses some lengths besides (the adapter's rule for it).
func CheckTopic(topic string) error {
	if topic == "" || len(topic) > MaxTopicLen {
		return errTopic
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return errTopic
		}
	}
	return nil
}

// CheckPayload accepts a plaintext payload of n bytes when it fits one aes128gcm body of
// MaxBody bytes (MaxPayload).
func CheckPayload(n int) error {
	if n > MaxPayload {
		return fmt.Errorf("is %d bytes; at most %d (one %d-byte aes128gcm body)", n, MaxPayload, MaxBody)
	}
	return nil
}

// EndpointReason is the reason a job is refused for an endpoint the provider registry does
// not route (the error of providers.Registry.Resolve): the intake dead-letters the job with
// it, and `gateway-worker send` refuses its subscription with it. Resolve's errors never quote
// the endpoint.
func EndpointReason(err error) string {
	if errors.Is(err, providers.ErrNotHTTPS) {
		return "subscription.endpoint: not https"
	}
	return "subscription.endpoint: " + strings.TrimPrefix(err.Error(), "providers: ")
}
