package main

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// checkPauseRequest refuses a pause an operator asks for (`gateway-worker pause`) that status
// could not show as it is: a provider id no registry can have (checkProviderID), or a reason
// that is not one line of plain text (checkReason). The Inspector records any pause.
func checkPauseRequest(provider, reason string) error {
	if err := checkProviderID(provider); err != nil {
		return err
	}
	return checkReason(reason)
}

// checkProviderID refuses what no registry id can be: empty, or holding spaces or control
// characters.
func checkProviderID(id string) error {
	if strings.TrimSpace(id) == "" {
		return errors.New("PROVIDER is empty: give a provider id of the registry (fcm, autopush, apple, wns, fallback, ...)")
	}
	if strings.IndexFunc(id, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return fmt.Errorf("PROVIDER %q is not a provider id: ids hold no spaces or control characters", id)
	}
	return nil
}

// maxPauseReason bounds a pause's reason: status prints it on one line of a table.
const maxPauseReason = 500

// checkReason refuses a reason that status could not print as the one line it is: anything
// but printable characters (a newline or an escape sequence would forge or garble the lines
// after it, a bidirectional override would reorder them), text that is not UTF-8, and more
// than maxPauseReason bytes.
func checkReason(reason string) error {
	if !utf8.ValidString(reason) {
		return fmt.Errorf("--reason %q is not valid UTF-8: give one line of plain text", reason)
	}
	for i, r := range reason {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("--reason holds a control or format character (%q at byte %d): give one line of plain text", r, i)
		}
	}
	if len(reason) > maxPauseReason {
		return fmt.Errorf("--reason is %d bytes long: at most %d", len(reason), maxPauseReason)
	}
	return nil
}
