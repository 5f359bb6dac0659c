package ece

// The fixed error values, so black-box fuzz tests can assert that an error
// is one of them: a fixed message cannot carry input bytes.
var (
	DecryptErrors = []error{errUAKey, errShortHeader, errKeyIDLen, errRecordSize, errShortRecord,
		errMultiRecord, errKeyID, errAuth, errPadding}
	KeyErrors = []error{errP256dhEncoding, errP256dhPoint, errAuthEncoding}
)
