package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Why PeekID found no id to place or name a job by.
var (
	// ErrNotObject: the entry is not one whole JSON object (or null).
	ErrNotObject = errors.New("job: not a JSON object")
	// ErrNoID: the object has no "id", or it is null or "".
	ErrNoID = errors.New(`job: no "id"`)
	// ErrIDNotString: the object's "id" is a number, a boolean, an object or an array.
	ErrIDNotString = errors.New(`job: "id" is not a string`)
)

// PeekID reads the "id" of a job entry without decoding the rest, for what must place or name
// a job before, or whatever, Decode says of it: a producer shards by it, the intake names the
// dead record of an invalid job by it, and enqueue and audit refuse or skip a line without one.
//
// id is the first top-level "id" string as given, even when it is itself what Decode refuses
// (too long, not printable ASCII), and even when the JSON breaks after it: that is the string
// the upstream enqueued and will look for. err is nil when raw is one whole JSON object whose
// "id" is a non-empty string; otherwise it wraps ErrNotObject (with what is wrong), ErrNoID or
// ErrIDNotString.
func PeekID(raw []byte) (id string, err error) {
	id, _, err = peek(raw)
	return id, err
}

// PeekIntake reads what a producer needs to place a job entry without decoding the rest: its
// id (which picks the shard, as PeekID reads it) and the intake of its class, ClassBulk when
// its top-level "class" is "bulk" and ClassTransactional otherwise (a class Decode refuses is
// refused there, from whichever intake).
func PeekIntake(raw []byte) (id string, intake Class, err error) {
	id, class, err := peek(raw)
	if class == string(ClassBulk) {
		return id, ClassBulk, err
	}
	return id, ClassTransactional, err
}

// peek is PeekID, with the first top-level "class" string ("" when none).
func peek(raw []byte) (id, class string, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	switch {
	case err != nil:
		return "", "", notObject(err)
	case tok == nil: // null: an object without members, as encoding/json decodes it
		if err := atEnd(dec); err != nil {
			return "", "", err
		}
		return "", "", ErrNoID
	case tok != json.Delim('{'):
		return "", "", fmt.Errorf("%w: a JSON %s", ErrNotObject, kind(tok))
	}
	idErr, found := ErrNoID, false
	for dec.More() {
		name, err := dec.Token()
		if err != nil {
			return id, class, notObject(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return id, class, notObject(err)
		}
		if name == "class" && class == "" && v[0] == '"' {
			_ = json.Unmarshal(v, &class)
		}
		if name != "id" || found {
			continue
		}
		found = true
		switch v[0] {
		case '"':
			if err := json.Unmarshal(v, &id); err != nil {
				return "", "", notObject(err)
			}
			if id != "" {
				idErr = nil
			}
		case 'n': // null
		default:
			idErr = ErrIDNotString
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return id, class, notObject(err)
	}
	if err := atEnd(dec); err != nil {
		return id, class, err
	}
	return id, class, idErr
}

// atEnd refuses anything but white space after the top-level value.
func atEnd(dec *json.Decoder) error {
	switch _, err := dec.Token(); {
	case err == io.EOF:
		return nil
	case err != nil:
		return notObject(err)
	}
	return fmt.Errorf("%w: data after the top-level value", ErrNotObject)
}

func notObject(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: %v", ErrNotObject, err)
}

// kind names the JSON type of a first token that is not an object's '{'.
func kind(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	}
	return "number"
}
