package adapter

import (
	"fmt"

	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/providers"
)

// checkTopic applies the Topic rule of the job format (job.CheckTopic) to a topic, if any,
// and, for Apple, the length rule Apple enforces with BadWebPushTopic: a length one more than
// a multiple of 4 cannot be base64url-decoded, and Apple decodes it.
func checkTopic(kind, topic string) error {
	if topic == "" {
		return nil
	}
	if err := job.CheckTopic(topic); err != nil {
		return fmt.Errorf("topic: %w", err)
	}
	if kind == providers.KindApple && len(topic)%4 == 1 {
		return fmt.Errorf("topic length %d is one more than a multiple of 4, which Apple refuses", len(topic))
	}
	return nil
}

// maxBody is the largest aes128gcm body a provider accepts: WNS takes job.MaxBodyWNS bytes,
// the others the job.MaxBody that RFC 8030 requires.
func maxBody(kind string) int {
	if kind == providers.KindWNS {
		return job.MaxBodyWNS
	}
	return job.MaxBody
}
