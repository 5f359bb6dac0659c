package providers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
)

// Version is the registry.yaml format this build reads.
const Version = 1

// MaxFileSize bounds a registry file; the shipped one is a few KiB.
const MaxFileSize = 1 << 20

var idPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// Load reads and parses a registry file. Problems in the file come back as Errors; a file that
// cannot be read comes back as the os error, wrapped.
func Load(path string) (*Registry, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// readFile reads at most one byte more than MaxFileSize, so Parse can refuse a larger file
// without this reading all of it. Only a regular file is read: opening a FIFO would block
// until a writer came, and a running worker's watch would stop with it.
func readFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("providers: read registry: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("providers: read registry: %w", err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("providers: read registry %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("providers: read registry: %w", err)
	}
	return data, nil
}

// Parse checks a registry file's content and builds the Registry; filename only labels errors.
// Every problem found is returned at once, as Errors in line order.
func Parse(filename string, data []byte) (*Registry, error) {
	d := &decoder{file: filename}
	var reg *Registry
	if root := d.document(data); root != nil {
		reg = d.registry(root)
	}
	if len(d.errs) > 0 {
		slices.SortStableFunc(d.errs, func(a, b *Error) int { return a.Line - b.Line })
		return nil, d.errs
	}
	return reg, nil
}

// decoder collects problems while walking one file's node tree.
type decoder struct {
	file string
	errs Errors
}

func (d *decoder) add(line int, field, problem string) {
	d.errs = append(d.errs, &Error{File: d.file, Line: max(line, 1), Field: field, Problem: problem})
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document parses data as exactly one YAML document and returns its root node, or nil after
// recording why there is none.
func (d *decoder) document(data []byte) (root *yaml.Node) {
	if len(data) > MaxFileSize {
		d.add(1, "", fmt.Sprintf("file is larger than %d bytes", MaxFileSize))
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := decode(dec, &doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.add(1, "", "registry is empty (want version: 1 and a providers: list)")
		} else {
			d.syntax(err, data)
		}
		return nil
	}
	var extra yaml.Node
	switch err := decode(dec, &extra); {
	case err == nil:
		d.add(extra.Line, "", "more than one YAML document: a registry is one document (remove this ---)")
	case !errors.Is(err, io.EOF):
		d.syntax(err, data)
	}
	if len(doc.Content) == 0 || doc.Content[0].ShortTag() == "!!null" {
		d.add(1, "", "registry is empty (want version: 1 and a providers: list)")
		return nil
	}
	return doc.Content[0]
}

// decode runs the YAML parser, turning a parser panic into an error: a broken file must be a
// message, never a crashed worker.
func decode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: parser failed: %v", r)
		}
	}()
	return dec.Decode(n)
}

// syntax records a YAML parser error of data at the line of its problem.
func (d *decoder) syntax(err error, data []byte) {
	msg, line := err.Error(), 1
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		line = problemLine(data, line, msg)
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	d.add(line, "", "YAML syntax: "+clip(msg))
}

// problemLineMax bounds the lines problemLine parses again one prefix at a time.
const problemLineMax = 5000

// problemLine is the line of data where the parser's error msg arises. The parser names the
// line of the construct it was in when that construct began, not where it broke ("did not find
// expected '-' indicator" names the line of the list, not the entry indented wrong four lines
// below): the first prefix of data, from line on, that fails with the same message ends at the
// line to report. A prefix that fails otherwise (cut inside a quoted or flow value) does not
// count; without one, line stands.
func problemLine(data []byte, line int, msg string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > problemLineMax {
		return line
	}
	for k := max(line, 1); k <= len(lines); k++ {
		var n yaml.Node
		err := decode(yaml.NewDecoder(bytes.NewReader(bytes.Join(lines[:k], nil))), &n)
		if err == nil || errors.Is(err, io.EOF) {
			continue
		}
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil && m[2] == msg {
			return k
		}
	}
	return line
}

// pair is one key and its value in a mapping.
type pair struct{ key, val *yaml.Node }

// fields checks mapping n (already known to be a mapping) and returns its known keys. Unknown,
// duplicate and non-scalar keys and alias values are recorded and left out. explain maps keys
// that are refused here on purpose to the reason.
func (d *decoder) fields(n *yaml.Node, path string, known []string, explain map[string]string) map[string]pair {
	out := make(map[string]pair, len(n.Content)/2)
	first := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.add(k.Line, path, "want a field name, got "+describe(k))
			continue
		}
		name, field := k.Value, join(path, clip(k.Value))
		if line, dup := first[name]; dup {
			d.add(k.Line, field, fmt.Sprintf("duplicate key (first at line %d)", line))
			continue
		}
		first[name] = k.Line
		switch {
		case explain[name] != "":
			d.add(k.Line, field, explain[name])
		case !slices.Contains(known, name):
			d.add(k.Line, field, unknownKey(name, known))
		case v.Kind == yaml.AliasNode:
			d.add(v.Line, field, "YAML aliases are not supported (put shared settings under defaults:)")
		default:
			out[name] = pair{k, v}
		}
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapping returns n when it is a mapping; a null value counts as an empty mapping (a section
// whose lines are all commented out). Anything else is recorded.
func (d *decoder) mapping(n *yaml.Node, field string) (*yaml.Node, bool) {
	switch {
	case n.Kind == yaml.MappingNode:
		return n, true
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null":
		return &yaml.Node{Kind: yaml.MappingNode, Line: n.Line}, true
	}
	d.add(n.Line, field, "want a mapping, got "+describe(n))
	return nil, false
}

// settingsIn flattens the settings of an entry or of defaults (breaker keys become
// "breaker.window") so that defaults merge field by field, breaker included.
func (d *decoder) settingsIn(m map[string]pair, path string) map[string]*yaml.Node {
	out := make(map[string]*yaml.Node)
	for _, s := range settings {
		if p, ok := m[s.name]; ok {
			out[s.name] = p.val
		}
	}
	if b, ok := m["breaker"]; ok {
		if bm, ok := d.mapping(b.val, join(path, "breaker")); ok {
			for k, p := range d.fields(bm, join(path, "breaker"), breakerKeys, nil) {
				out["breaker."+k] = p.val
			}
		}
	}
	return out
}

// Where a setting's value came from, for precedence and for pointing at the right line.
const (
	fromBuiltin = iota
	fromDefaults
	fromEntry
)

type origin struct {
	level int
	line  int
	field string
	bad   bool // the value was refused; checks that involve it are skipped
}

// registry walks the root mapping.
func (d *decoder) registry(root *yaml.Node) *Registry {
	if root.Kind != yaml.MappingNode {
		d.add(root.Line, "", "want a mapping with version: and providers:, got "+describe(root))
		return nil
	}
	top := d.fields(root, "", topKeys, nil)
	d.version(root, top)

	defNodes := map[string]*yaml.Node{}
	if p, ok := top["defaults"]; ok {
		if m, ok := d.mapping(p.val, "defaults"); ok {
			defNodes = d.settingsIn(d.fields(m, "defaults", defaultKeys, notInDefaults), "defaults")
		}
	}
	def, defOrigin := d.merge(builtin(), map[string]origin{}, defNodes, "defaults", fromDefaults)
	d.crossCheck(&def, defOrigin, fromDefaults)

	p, ok := top["providers"]
	if !ok {
		d.add(root.Line, "providers", "required: a list of entries, one of them with id: fallback")
		d.fleet(top, &Registry{}, 0) // still report every problem in the file at once
		return nil
	}
	if p.val.Kind != yaml.SequenceNode {
		d.add(p.val.Line, "providers", "want a list of entries, got "+describe(p.val))
		d.fleet(top, &Registry{}, 0)
		return nil
	}
	reg := &Registry{byID: map[string]*Provider{}, bySuffix: map[string]*Provider{}}
	idLine := map[string]int{}
	hostOwner := map[string]string{} // host -> "entry (line N)"
	if n := len(p.val.Content); n > MaxProviders {
		d.add(p.val.Content[MaxProviders].Line, "providers", fmt.Sprintf("%d entries; at most %d (each holds a Redis connection per shard in every replica)", n, MaxProviders))
	}
	for i, n := range p.val.Content {
		path := fmt.Sprintf("providers[%d]", i)
		if n.Kind != yaml.MappingNode {
			d.add(n.Line, path, "want a mapping with id:, hosts: and settings, got "+describe(n))
			continue
		}
		prov, m := d.entry(n, path, def, defOrigin)
		if prov.ID != "" {
			if line, dup := idLine[prov.ID]; dup {
				d.add(n.Line, path+".id", fmt.Sprintf("duplicate id %q (first at line %d)", prov.ID, line))
				continue
			}
			idLine[prov.ID] = n.Line
		}
		d.hosts(n, path, prov, m, hostOwner, reg)
		reg.list = append(reg.list, prov)
		if prov.ID != "" {
			reg.byID[prov.ID] = prov
		}
	}
	reg.fallback = reg.byID[FallbackID]
	if reg.fallback == nil {
		d.add(p.key.Line, "providers", "no entry with id: fallback (endpoints on hosts no entry lists need one; give it kind: generic and no hosts)")
	}
	d.fleet(top, reg, len(reg.list))
	if reg.budget == nil {
		// Without a budget every provider may fill its max_in_flight at once.
		sum := 0
		for _, prov := range reg.list {
			sum += prov.MaxInFlight
		}
		if sum > MaxTotalInFlight {
			d.add(p.key.Line, "providers", fmt.Sprintf("the entries' max_in_flight add up to %d; a replica holds at most %d requests in flight (lower them, or share a budget: total_in_flight)", sum, MaxTotalInFlight))
		}
	}
	return reg
}

func (d *decoder) version(root *yaml.Node, top map[string]pair) {
	p, ok := top["version"]
	if !ok {
		d.add(root.Line, "version", fmt.Sprintf("required: write version: %d", Version))
		return
	}
	var v int
	if p.val.Kind != yaml.ScalarNode || p.val.ShortTag() != "!!int" || p.val.Decode(&v) != nil {
		d.add(p.val.Line, "version", "want a whole number, got "+describe(p.val))
		return
	}
	if v != Version {
		d.add(p.val.Line, "version", fmt.Sprintf("unsupported version %d (this build reads version %d)", v, Version))
	}
}

// merge lays the settings in nodes over base. Problems are recorded only for the level that
// wrote the value, so a bad default is reported once, not once per entry.
func (d *decoder) merge(base Provider, baseOrigin map[string]origin, nodes map[string]*yaml.Node, path string, level int) (Provider, map[string]origin) {
	out := make(map[string]origin, len(settings))
	for k, o := range baseOrigin {
		out[k] = o
	}
	for _, s := range settings {
		n, ok := nodes[s.name]
		if !ok {
			continue
		}
		o := origin{level: level, line: n.Line, field: join(path, s.name)}
		if msg := s.parse(n, &base); msg != "" {
			d.add(n.Line, o.field, msg)
			o.bad = true
		}
		out[s.name] = o
	}
	return base, out
}

// crossCheck enforces the rules between two settings: each phase timeout fits in the overall
// timeout, and min_in_flight is at most max_in_flight. A pair is checked at the most specific
// level that set either side (a conflict inside defaults is reported once, under defaults), and
// reported at the more specific of the two fields.
func (d *decoder) crossCheck(p *Provider, from map[string]origin, level int) {
	for _, ph := range []struct {
		name string
		v    time.Duration
	}{
		{"connect_timeout", p.ConnectTimeout},
		{"tls_timeout", p.TLSTimeout},
		{"response_header_timeout", p.ResponseHeaderTimeout},
	} {
		d.ordered(from, level, ph.name, "timeout", ph.v <= p.Timeout,
			func(src string) string { return fmt.Sprintf("%s is longer than timeout (%s%s)", ph.v, p.Timeout, src) },
			func(src string) string {
				return fmt.Sprintf("%s is shorter than %s (%s%s)", p.Timeout, ph.name, ph.v, src)
			})
	}
	if from["min_in_flight"].level == fromBuiltin {
		// Nobody asked for this floor: a small max_in_flight lowers the built-in one with it
		// rather than refuse a file that never mentions min_in_flight. From the built-in value
		// each time, so a small max_in_flight in defaults: does not lower an entry's floor
		// that sets a larger one.
		p.MinInFlight = min(builtin().MinInFlight, p.MaxInFlight)
	}
	d.ordered(from, level, "min_in_flight", "max_in_flight", p.MinInFlight <= p.MaxInFlight,
		func(src string) string {
			return fmt.Sprintf("%d is more than max_in_flight (%d%s)", p.MinInFlight, p.MaxInFlight, src)
		},
		func(src string) string {
			return fmt.Sprintf("%d is less than min_in_flight (%d%s)", p.MaxInFlight, p.MinInFlight, src)
		})
}

// ordered reports a broken rule "small <= big" (ok false) between two settings, once: at the
// level that set the later of the two, on the field set there (small when both were).
// smallMsg and bigMsg get the other value's source (", from defaults", ...).
func (d *decoder) ordered(from map[string]origin, level int, small, big string, ok bool, smallMsg, bigMsg func(src string) string) {
	s, b := from[small], from[big]
	if ok || s.bad || b.bad || max(s.level, b.level) != level {
		return
	}
	// The other value's source, unless it is the level being checked ("from defaults" under
	// defaults. says nothing).
	src := func(o origin) string {
		if o.level == level {
			return ""
		}
		return source(o)
	}
	if s.level >= b.level {
		d.add(s.line, s.field, smallMsg(src(b)))
	} else {
		d.add(b.line, b.field, bigMsg(src(s)))
	}
}

func source(o origin) string {
	switch o.level {
	case fromBuiltin:
		return ", the built-in default"
	case fromDefaults:
		return ", from defaults"
	}
	return ""
}

// entry reads one provider entry's id, kind and settings and returns its known keys; hosts are
// checked by the caller once the id is known to be unique.
func (d *decoder) entry(n *yaml.Node, path string, def Provider, defOrigin map[string]origin) (*Provider, map[string]pair) {
	m := d.fields(n, path, entryKeys, nil)
	// Settings the entry leaves out keep the merged defaults and their origin, so a refused
	// default stays refused (bad is carried over) without being reported again.
	prov, from := d.merge(def, defOrigin, d.settingsIn(m, path), path, fromEntry)
	d.crossCheck(&prov, from, fromEntry)

	if p, ok := m["id"]; !ok {
		d.add(n.Line, path+".id", "required")
	} else if id, ok := d.str(p.val, path+".id"); ok {
		if idPattern.MatchString(id) {
			prov.ID = id
		} else {
			d.add(p.val.Line, path+".id", fmt.Sprintf("want a lower-case letter then up to 31 of a-z, 0-9, '_', '-', got %q", clip(id)))
		}
	}
	switch prov.ID {
	case KindFCM, KindAutopush, KindApple, KindWNS:
		prov.Kind = prov.ID
	default:
		prov.Kind = KindGeneric
	}
	if p, ok := m["kind"]; ok {
		if k, ok := d.str(p.val, path+".kind"); ok {
			if slices.Contains(kinds, k) {
				prov.Kind = k
			} else {
				msg := fmt.Sprintf("unknown kind %q (want one of %s)", clip(k), strings.Join(kinds, ", "))
				if s := suggest(k, kinds); s != "" {
					msg = fmt.Sprintf("unknown kind %q (did you mean %s? want one of %s)", clip(k), s, strings.Join(kinds, ", "))
				}
				d.add(p.val.Line, path+".kind", msg)
			}
		}
	}
	return &prov, m
}

// hosts checks an entry's hosts and indexes them. Each host may belong to one entry only: the
// first entry that lists it keeps it and later ones are refused.
func (d *decoder) hosts(entry *yaml.Node, path string, prov *Provider, m map[string]pair, owner map[string]string, reg *Registry) {
	field := path + ".hosts"
	p, ok := m["hosts"]
	if ok && p.val.Kind == yaml.ScalarNode && p.val.ShortTag() == "!!null" {
		ok = false // "hosts:" with nothing after it
	}
	if !ok {
		if prov.ID != FallbackID {
			d.add(entry.Line, field, "required: list the host names this provider serves")
		}
		return
	}
	if p.val.Kind != yaml.SequenceNode {
		d.add(p.val.Line, field, "want a list of host names, got "+describe(p.val))
		return
	}
	switch {
	case prov.ID == FallbackID && len(p.val.Content) > 0:
		d.add(p.key.Line, field, "the fallback takes every host no other entry lists; it cannot list hosts (add an entry for them)")
		return
	case prov.ID != FallbackID && len(p.val.Content) == 0:
		d.add(p.key.Line, field, "empty: list the host names this provider serves")
		return
	case len(p.val.Content) > MaxHostsPerProvider:
		d.add(p.val.Content[MaxHostsPerProvider].Line, field, fmt.Sprintf("%d hosts; at most %d (a host covers its subdomains; a long generated list belongs under fallback)", len(p.val.Content), MaxHostsPerProvider))
	}
	name := prov.ID
	if name == "" {
		name = path
	}
	for i, n := range p.val.Content {
		hf := fmt.Sprintf("%s[%d]", field, i)
		raw, ok := d.str(n, hf)
		if !ok {
			continue
		}
		h, msg := checkHost(raw)
		if msg != "" {
			d.add(n.Line, hf, msg)
			continue
		}
		if o, taken := owner[h]; taken {
			d.add(n.Line, hf, fmt.Sprintf("host %s is already listed under %s", h, o))
			continue
		}
		owner[h] = fmt.Sprintf("%s (line %d)", name, n.Line)
		prov.Hosts = append(prov.Hosts, h)
		reg.bySuffix[h] = prov
	}
}

// str returns a string scalar's value, recording anything else.
func (d *decoder) str(n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.add(n.Line, field, "want a string, got "+describe(n))
		return "", false
	}
	return n.Value, true
}
