package pushsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The admin API is plain JSON over HTTP on its own listener, for tools outside the test process
// (the CLI, the demo, curl). Every handler calls the Go API; nothing here has its own state.
//
//	POST   /subscriptions          {"provider", "host", "application_server_key"} -> Subscription
//	POST   /subscriptions/expire   {"endpoint"} -> {"expired": true} (404 if unknown)
//	GET    /deliveries?endpoint=E&since=N -> [Delivery] with seq > N
//	GET    /faults                 -> {"<provider>": fault}
//	PUT    /faults/{provider}      {"kind", "ratio", "status", "retry_after", "delay"} ("*": all)
//	DELETE /faults/{provider}
//	GET    /stats                  -> Stats
//	POST   /reset                  -> 204
//	GET    /ca.pem                 -> the CA certificate
//
// retry_after and delay are seconds (a number) or a Go duration string ("250ms"). Any other
// path answers 404 (405 for a method the path does not take) listing the endpoints, and every
// refusal lists the values it takes; docs/pushsim.md documents each endpoint.

// maxAdminBody bounds admin request bodies.
const maxAdminBody = 64 << 10

// adminEndpoints are the admin API's routes, as its refusals list them.
var adminEndpoints = []struct{ method, path string }{
	{"POST", "/subscriptions"}, {"POST", "/subscriptions/expire"}, {"GET", "/deliveries"},
	{"GET", "/faults"}, {"PUT", "/faults/{provider}"}, {"DELETE", "/faults/{provider}"},
	{"GET", "/stats"}, {"POST", "/reset"}, {"GET", "/ca.pem"},
}

func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /subscriptions", s.adminSubscribe)
	mux.HandleFunc("POST /subscriptions/expire", s.adminExpire)
	mux.HandleFunc("GET /deliveries", s.adminDeliveries)
	mux.HandleFunc("GET /faults", s.adminFaults)
	mux.HandleFunc("PUT /faults/{provider}", s.adminSetFault)
	mux.HandleFunc("DELETE /faults/{provider}", s.adminClearFault)
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Stats()) })
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, _ *http.Request) {
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /ca.pem", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-pem-file")
		_, _ = w.Write(s.ca.certPEM)
	})
	mux.HandleFunc("/", adminUnknown)
	return mux
}

// adminUnknown answers what no route takes: 405 with the methods the path takes, or 404, each
// listing what the API has, so that a caller's typo is answered with what to type.
func adminUnknown(w http.ResponseWriter, r *http.Request) {
	var allow, all []string
	for _, e := range adminEndpoints {
		all = append(all, e.method+" "+e.path)
		if adminPathMatches(e.path, r.URL.Path) {
			allow = append(allow, e.method)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("pushsim: %s %s: the method is not one of %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
		return
	}
	writeError(w, http.StatusNotFound, fmt.Errorf("pushsim: no admin endpoint %s %s (the endpoints: %s)", r.Method, r.URL.Path, strings.Join(all, ", ")))
}

// adminPathMatches reports whether path is one pattern matches ("{provider}": one segment).
func adminPathMatches(pattern, path string) bool {
	if head, ok := strings.CutSuffix(pattern, "{provider}"); ok {
		rest, ok := strings.CutPrefix(path, head)
		return ok && rest != "" && !strings.Contains(rest, "/")
	}
	return pattern == path
}

// SubscribeRequest is the body of POST /subscriptions.
type SubscribeRequest struct {
	Provider             string `json:"provider"`
	Host                 string `json:"host,omitempty"`
	ApplicationServerKey string `json:"application_server_key"`
}

func (s *Server) adminSubscribe(w http.ResponseWriter, r *http.Request) {
	var req SubscribeRequest
	if !readJSON(w, r, &req, "provider, host, application_server_key") {
		return
	}
	sub, err := s.Subscribe(req.Provider, req.Host, req.ApplicationServerKey)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusCreated, sub)
}

func (s *Server) adminExpire(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Endpoint string `json:"endpoint"`
	}
	if !readJSON(w, r, &req, "endpoint") {
		return
	}
	if !s.Expire(req.Endpoint) {
		writeError(w, http.StatusNotFound, errors.New("pushsim: no such subscription (endpoint: the one POST /subscriptions answered)"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"expired": true})
}

func (s *Server) adminDeliveries(w http.ResponseWriter, r *http.Request) {
	var since uint64
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("pushsim: since %q is not a delivery's seq (a whole number, 0 or more: the deliveries after it are listed)", v))
			return
		}
		since = n
	}
	writeJSON(w, http.StatusOK, s.DeliveriesSince(since, r.URL.Query().Get("endpoint")))
}

// FaultJSON is a Fault on the admin API.
type FaultJSON struct {
	Kind       FaultKind    `json:"kind"`
	Ratio      float64      `json:"ratio,omitempty"`
	Status     int          `json:"status,omitempty"`
	RetryAfter JSONDuration `json:"retry_after,omitempty"`
	Delay      JSONDuration `json:"delay,omitempty"`
}

// JSONDuration reads seconds (a number) or a Go duration string, and writes seconds.
type JSONDuration time.Duration

// MarshalJSON writes the duration in seconds.
func (d JSONDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).Seconds())
}

// UnmarshalJSON reads a number of seconds or a duration string such as "250ms".
func (d *JSONDuration) UnmarshalJSON(b []byte) error {
	var secs float64
	if err := json.Unmarshal(b, &secs); err == nil {
		*d = JSONDuration(secs * float64(time.Second))
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("%w: a duration is seconds (a number) or a string like \"250ms\", got %s", ErrFault, b)
	}
	v, err := time.ParseDuration(str)
	if err != nil {
		return fmt.Errorf("%w: duration %q is not a Go duration (units ns, us, ms, s, m, h: \"250ms\", \"2s\") nor seconds", ErrFault, str)
	}
	*d = JSONDuration(v)
	return nil
}

func toFaultJSON(f Fault) FaultJSON {
	return FaultJSON{Kind: f.Kind, Ratio: f.Ratio, Status: f.Status, RetryAfter: JSONDuration(f.RetryAfter), Delay: JSONDuration(f.Delay)}
}

func (s *Server) adminFaults(w http.ResponseWriter, _ *http.Request) {
	out := map[string]FaultJSON{}
	for p, f := range s.Faults() {
		out[p] = toFaultJSON(f)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) adminSetFault(w http.ResponseWriter, r *http.Request) {
	var req FaultJSON
	if !readJSON(w, r, &req, "kind, ratio, status, retry_after, delay") {
		return
	}
	f := Fault{Kind: req.Kind, Ratio: req.Ratio, Status: req.Status, RetryAfter: time.Duration(req.RetryAfter), Delay: time.Duration(req.Delay)}
	if err := s.SetFault(r.PathValue("provider"), f); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	s.adminFaults(w, r)
}

func (s *Server) adminClearFault(w http.ResponseWriter, r *http.Request) {
	if err := s.SetFault(r.PathValue("provider"), Fault{}); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// readJSON decodes the body into v; fields are v's fields, which a refusal lists.
func readJSON(w http.ResponseWriter, r *http.Request, v any, fields string) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, ErrFault) { // a value the fault's own types refused: it says which
			writeError(w, http.StatusBadRequest, err)
			return false
		}
		writeError(w, http.StatusBadRequest, fmt.Errorf("pushsim: bad JSON body: %w (the fields: %s)", err, fields))
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}
