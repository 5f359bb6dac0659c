package vapid

// ValidateSubject is the subject check NewSigner makes, for the tests of package vapid_test.
func ValidateSubject(sub string) error {
	_, err := normalizeSubject(sub)
	return err
}
