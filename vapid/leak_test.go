package vapid_test

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/vapidtest"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// brokenKeyForms are a real P-256 key written the ways operators get it wrong: raw base64 cut,
// lengthened, mangled, in the wrong encoding; PEM cut, unlabelled, relabelled, corrupted, folded
// onto one line. Each comes back with the key material it must never leak: the value itself
// and the base64 of the scalar and of the DER.
func brokenKeyForms(t *testing.T) (forms map[string]string, secrets []string) {
	t.Helper()
	k := vapidtest.NewKey(t)
	scalar, sec1, pkcs8 := k.Scalar, k.SEC1, k.PKCS8
	sec1PEM, pkcs8PEM := k.SEC1PEM(), k.PKCS8PEM()
	body := func(p string) string { // the base64 lines between the dashes
		var b strings.Builder
		for line := range strings.Lines(p) {
			if !strings.HasPrefix(line, "-----") {
				b.WriteString(line)
			}
		}
		return b.String()
	}
	url := k.Raw()
	std := base64.StdEncoding.EncodeToString(scalar)
	corrupt := append([]byte(nil), sec1...)
	corrupt[5] ^= 0xff // the tag of the scalar's OCTET STRING
	lines := strings.Split(strings.TrimSpace(sec1PEM), "\n")

	forms = map[string]string{
		"raw cut by one":            url[:len(url)-1],
		"raw cut by ten":            url[:len(url)-10],
		"raw with a character more": url + "A",
		"raw with four more":        url + "AAAA",
		"raw with a bad character":  url[:20] + "!" + url[21:],
		"raw with a space inside":   url[:20] + " " + url[20:],
		"raw twice":                 url + url,
		"raw quoted":                `"` + url + `"`,
		"raw with a prefix":         "key=" + url,
		"raw with padding junk":     std + "=junk",
		"raw in hex":                hex.EncodeToString(scalar),
		"raw in hex with 0x":        "0x" + hex.EncodeToString(scalar),
		"raw of the DER":            base64.RawURLEncoding.EncodeToString(sec1),
		"PEM cut":                   strings.Join(lines[:2], "\n"),
		"PEM without its footer":    strings.Join(lines[:len(lines)-1], "\n"),
		"PEM without its header":    strings.Join(lines[1:], "\n"),
		"PEM body alone":            body(sec1PEM),
		"PEM on one line":           strings.ReplaceAll(sec1PEM, "\n", " "),
		"PEM with literal \\n":      strings.ReplaceAll(sec1PEM, "\n", `\n`),
		"PEM relabelled PKCS#8":     strings.ReplaceAll(pkcs8PEM, "PRIVATE KEY", "EC PRIVATE KEY"),
		"PEM relabelled SEC1":       strings.ReplaceAll(sec1PEM, "EC PRIVATE KEY", "PRIVATE KEY"),
		"PEM of corrupt DER":        string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: corrupt})),
		"PEM of a truncated DER":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8[:len(pkcs8)-5]})),
		"PEM typed with the key":    string(pem.EncodeToMemory(&pem.Block{Type: url, Bytes: sec1})),
		"PEM with a bad character":  strings.Replace(sec1PEM, lines[1][:10], lines[1][:9]+"!", 1),
		"PEM legacy encrypted": string(pem.EncodeToMemory(&pem.Block{
			Type: "EC PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: sec1,
		})),
	}
	secrets = []string{url, std, hex.EncodeToString(scalar), body(sec1PEM), body(pkcs8PEM),
		base64.StdEncoding.EncodeToString(sec1), base64.StdEncoding.EncodeToString(pkcs8)}
	return forms, secrets
}

// assertNoKeyMaterial fails when text holds the value, a secret, or any run of more than 8
// characters of either (leaving out the PEM's dashed lines, which are labels, not key).
func assertNoKeyMaterial(t *testing.T, what, text, value string, secrets []string) {
	t.Helper()
	const run = 9
	for _, s := range append([]string{value}, secrets...) {
		for line := range strings.Lines(s) {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "-----") {
				continue
			}
			for i := 0; i+run <= len(line); i++ {
				if strings.Contains(text, line[i:i+run]) {
					t.Errorf("%s %q holds %q of the key material", what, text, line[i:i+run])
					return
				}
			}
		}
	}
}

// TestKeyErrorsLeakNoKeyMaterial: whatever broken form a key arrives in, and however it is
// given (as text to ParseKey; to LoadKeyFile as the value itself or as a file's content), no
// error repeats any of it. LoadKeyFile's errors name the key and the expected forms.
func TestKeyErrorsLeakNoKeyMaterial(t *testing.T) {
	forms, secrets := brokenKeyForms(t)
	dir := t.TempDir()
	for name, form := range forms {
		t.Run(name, func(t *testing.T) {
			if _, err := vapid.ParseKey("main", []byte(form)); err != nil {
				assertNoKeyMaterial(t, "ParseKey error", err.Error(), form, secrets)
			}
			_, err := vapid.LoadKeyFile("main", form)
			if err == nil {
				t.Fatal("LoadKeyFile accepted a broken key")
			}
			assertNoKeyMaterial(t, "LoadKeyFile error", err.Error(), form, secrets)
			for _, w := range []string{`vapid: bad key: "main": not a readable file (`, ") nor a valid raw key (",
				"; want the path of a PEM key file, or the raw 32-byte private key in base64url"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("LoadKeyFile error %q lacks %q", err, w)
				}
			}

			file := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".key")
			if err := os.WriteFile(file, []byte(form), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := vapid.LoadKeyFile("main", file); err != nil {
				assertNoKeyMaterial(t, "LoadKeyFile error for a file", err.Error(), form, secrets)
				if !strings.Contains(err.Error(), `vapid: bad key: "main": the file holds no usable key: `) || strings.Contains(err.Error(), file) {
					t.Errorf("LoadKeyFile error for a file = %q; want the key's name and not the path", err)
				}
			}
		})
	}
}
