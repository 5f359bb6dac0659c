package deploy_test

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
)

const (
	runbooksFile   = "../docs/runbooks.md"
	runbooksPrefix = "https://github.com/webpush-gateway/webpush-gateway/blob/main/docs/runbooks.md#"
)

// githubAnchor is the fragment GitHub gives a Markdown heading: lower case, spaces to
// dashes, punctuation other than - and _ dropped.
func githubAnchor(heading string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			sb.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// TestRunbooks: every alert links a section of docs/runbooks.md that exists, and every alert
// section there belongs to an alert the rules still have.
func TestRunbooks(t *testing.T) {
	f, err := os.Open(runbooksFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sections := map[string]string{}
	alertHeading := regexp.MustCompile(`^## (WebPush\w+)\s*$`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := alertHeading.FindStringSubmatch(sc.Text()); m != nil {
			sections[githubAnchor(m[1])] = m[1]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	b := build(t, "overlays/production")
	alerts := map[string]bool{}
	for _, g := range b.rules[0].Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts[r.Alert] = true
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbooksPrefix)
			if !ok {
				t.Errorf("alert %s: runbook_url %q is not a section of docs/runbooks.md", r.Alert, r.Annotations["runbook_url"])
				continue
			}
			if sections[anchor] != r.Alert {
				t.Errorf("alert %s: runbook_url #%s, but docs/runbooks.md has no section \"## %s\"", r.Alert, anchor, r.Alert)
			}
			if r.Labels["severity"] != "critical" && r.Labels["severity"] != "warning" {
				t.Errorf("alert %s: severity %q, want critical (pages) or warning", r.Alert, r.Labels["severity"])
			}
		}
	}
	for _, name := range sections {
		if !alerts[name] {
			t.Errorf("docs/runbooks.md has a section for %s, which no rule raises", name)
		}
	}
}
