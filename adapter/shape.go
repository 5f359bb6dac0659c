package adapter

import (
	"errors"
	"fmt"
)

// Provider kinds whose requests need shaping of their own.
const (
	kindApple = "apple"
	kindWNS   = "wns"
)

var errBadUrgency = errors.New("urgency must be very-low, low, normal or high")

// checkUrgency accepts the four values of RFC 8030 section 5.3, or none.
func checkUrgency(u string) error {
	switch u {
	case "", "very-low", "low", "normal", "high":
		return nil
	}
	return fmt.Errorf("%w, not %q", errBadUrgency, u)
}

// checkTopic applies RFC 8030 section 5.4 (at most 32 characters of the base64url alphabet)
// and, for Apple, the length rule Apple enforces with BadWebPushTopic: a length one more than a
// multiple of 4 cannot be base64url-decoded, and Apple decodes it.
func checkTopic(kind, topic string) error {
	if topic == "" {
		return nil
	}
	if len(topic) > 32 {
		return fmt.Errorf("topic is %d characters; at most 32 are allowed", len(topic))
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("topic has %q at position %d; only the base64url alphabet is allowed", c, i)
		}
	}
	if kind == kindApple && len(topic)%4 == 1 {
		return fmt.Errorf("topic length %d is one more than a multiple of 4, which Apple refuses", len(topic))
	}
	return nil
}

// maxBody is the largest aes128gcm body a provider accepts: WNS takes 5000 bytes, the others
// the 4096 that RFC 8030 requires.
func maxBody(kind string) int {
	if kind == kindWNS {
		return 5000
	}
	return 4096
}
