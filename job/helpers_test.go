package job

import (
	"encoding/json"
	"fmt"
	"time"
)

// A real P-256 point and auth secret, as a browser's PushSubscription.toJSON gives them.
const (
	testP256dh = "BGzLTRY9U16I_7a11ZuHYDtF7tAdU_A7HRfV1tjzUyZjbILmmPk59LS0S0FRSol5EibUgFciCBQH8sYJdKJlJmg"
	testAuth   = "HTY_t6ek0_3cY_YQLrdc_g"
	// testEndpoint's path stands for the bearer credential no reason may contain.
	testEndpoint = "https://fcm.googleapis.com/fcm/send/SECRET-PATH-abc123"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// validJob is a minimal valid job with id.
func validJob(id string) string {
	return fmt.Sprintf(`{"id":%q,"subscription":{"endpoint":%q,"keys":{"p256dh":%q,"auth":%q}},"payload":"hello"}`,
		id, testEndpoint, testP256dh, testAuth)
}

// jobWith is validJob with extra top-level members merged in (a nil value deletes one).
func jobWith(id string, extra map[string]any) string {
	m := map[string]any{}
	if err := json.Unmarshal([]byte(validJob(id)), &m); err != nil {
		panic(err)
	}
	for k, v := range extra {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}
