package taxonomy

import (
	"encoding/json"
	"math"
	"time"
)

// Outcome is what one delivery attempt came to: the code the dispatcher acts on, plus what the
// service said, for the ledger and for the operator.
type Outcome struct {
	Code       Code          `json:"code"`
	Status     int           `json:"status"` // HTTP status, 0 when no answer was received
	Provider   string        `json:"provider"`
	Retryable  bool          `json:"retryable"`
	RetryAfter time.Duration `json:"-"`      // 0 when the service gave none
	Detail     string        `json:"detail"` // provider's raw detail, cut to 256 bytes, never an endpoint
}

// outcomeJSON is Outcome's wire form: RetryAfter travels as "retry_after" in seconds, the unit
// of the Retry-After header, so a reader of the ledger needs no Go duration syntax.
type outcomeJSON struct {
	Code       Code    `json:"code"`
	Status     int     `json:"status"`
	Provider   string  `json:"provider"`
	Retryable  bool    `json:"retryable"`
	RetryAfter float64 `json:"retry_after"`
	Detail     string  `json:"detail"`
}

// MarshalJSON writes the outcome with "retry_after" in whole seconds (0 when none), rounded up
// so that a reader who waits that long is never early.
func (o Outcome) MarshalJSON() ([]byte, error) {
	return json.Marshal(outcomeJSON{
		Code:       o.Code,
		Status:     o.Status,
		Provider:   o.Provider,
		Retryable:  o.Retryable,
		RetryAfter: math.Ceil(o.RetryAfter.Seconds()),
		Detail:     o.Detail,
	})
}

// UnmarshalJSON reads what MarshalJSON writes. "retry_after" may carry a fraction; a negative
// value reads as none. Codes are taken as written, even unknown ones, so that a ledger written
// by a newer worker still reads; Code.Valid tells them apart.
func (o *Outcome) UnmarshalJSON(data []byte) error {
	var w outcomeJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*o = Outcome{
		Code:       w.Code,
		Status:     w.Status,
		Provider:   w.Provider,
		Retryable:  w.Retryable,
		RetryAfter: secondsToDuration(w.RetryAfter),
		Detail:     w.Detail,
	}
	return nil
}

// secondsToDuration converts seconds to a Duration, saturating instead of overflowing.
func secondsToDuration(s float64) time.Duration {
	switch {
	case !(s > 0): // also NaN
		return 0
	case s >= float64(math.MaxInt64)/float64(time.Second):
		return math.MaxInt64
	}
	return time.Duration(math.Round(s * float64(time.Second)))
}

// Local returns an outcome decided without an HTTP answer: before the request (BLOCKED,
// PAYLOAD_TOO_LARGE, INVALID_JOB, EXPIRED, CIRCUIT_OPEN) or instead of one (TRANSPORT_ERROR).
// Status is 0; Retryable follows the code; detail is cleaned like a provider's (cut to 256
// bytes, valid UTF-8, URLs cut to their host). The code is kept as given: an undefined one is
// not retryable and Code.Valid reports it.
//
// The outcomes of a send use Secrets.Local, which also keeps the endpoint's path out of the
// detail.
func Local(provider string, code Code, detail string) Outcome {
	return local(provider, code, detail, Secrets{})
}

func local(provider string, code Code, detail string, secrets Secrets) Outcome {
	return Outcome{
		Code:      code,
		Provider:  provider,
		Retryable: code.Retryable(),
		Detail:    cleanDetail(detail, secrets),
	}
}
