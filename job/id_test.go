package job_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/job"
)

func TestPeekID(t *testing.T) {
	long := strings.Repeat("y", 200)
	cases := []struct {
		name, raw, id string
		err           error // nil: the entry has a usable id
	}{
		{"valid", `{"id":"j1","payload":"x"}`, "j1", nil},
		{"white space around", " \t{\"id\" : \"j1\"}\r\n", "j1", nil},
		{"id after other members", `{"payload":"x","ttl":[1,{"id":"inner"}],"id":"j2"}`, "j2", nil},
		{"the first of two ids", `{"id":"first","id":"second"}`, "first", nil},
		{"too long for Decode", `{"id":"` + long + `"}`, long, nil},
		{"not ASCII", `{"id":"caf\u00e9"}`, "café", nil},
		{"JSON broken after the id", `{"id":"j3","subscription":`, "j3", job.ErrNotObject},
		{"data after the object", `{"id":"j4"} x`, "j4", job.ErrNotObject},
		{"a second object", `{"id":"j4"}{}`, "j4", job.ErrNotObject},
		{"empty", `{"id":""}`, "", job.ErrNoID},
		{"null id", `{"id":null}`, "", job.ErrNoID},
		{"no id", `{"payload":"x"}`, "", job.ErrNoID},
		{"empty object", `{}`, "", job.ErrNoID},
		{"null", `null`, "", job.ErrNoID},
		{"numeric id", `{"id":7}`, "", job.ErrIDNotString},
		{"object id", `{"id":{"id":"x"}}`, "", job.ErrIDNotString},
		{"array", `["id","j5"]`, "", job.ErrNotObject},
		{"string", `"j5"`, "", job.ErrNotObject},
		{"not JSON", `id=j5`, "", job.ErrNotObject},
		{"nothing", ``, "", job.ErrNotObject},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id, err := job.PeekID([]byte(c.raw))
			if id != c.id {
				t.Errorf("id = %.40q, want %.40q", id, c.id)
			}
			if c.err == nil && err != nil || c.err != nil && !errors.Is(err, c.err) {
				t.Errorf("err = %v, want %v", err, c.err)
			}
		})
	}
}

// TestPeekIDSaysWhatIsWrong: an entry that is not an object is refused with what it is or
// where its JSON breaks, never with a Go type name.
func TestPeekIDSaysWhatIsWrong(t *testing.T) {
	for raw, want := range map[string]string{
		`["id"]`:      "job: not a JSON object: a JSON array",
		`id=7`:        "job: not a JSON object: invalid character 'i' looking for beginning of value",
		`{"id":"a"`:   "job: not a JSON object: unexpected EOF",
		`{"id":"a"}x`: "job: not a JSON object: invalid character 'x' looking for beginning of value",
	} {
		if _, err := job.PeekID([]byte(raw)); err == nil || err.Error() != want {
			t.Errorf("PeekID(%s): %v, want %s", raw, err, want)
		}
	}
}
