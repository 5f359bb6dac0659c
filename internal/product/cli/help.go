package cli

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// helpWidth is the column the help wraps its text at.
const helpWidth = 100

// maxFlagColumn is the widest "--name METAVAR" the help aligns descriptions after; a longer one
// has its description on the next line.
const maxFlagColumn = 30

// PrintHelp writes the command's help to w, in the format every command shares: the usage
// line, the summary, the details, the examples, the flags under their headings (each as
// --name METAVAR, with its default, "(required)" for the required ones), where else flags come
// from, and the exit codes.
func (f *FlagSet) PrintHelp(w io.Writer) {
	f.claim()
	h := f.help
	fmt.Fprintf(w, "usage: %s\n\n", f.synopsis())
	fmt.Fprint(w, wrap(h.Summary, helpWidth, ""))
	if h.Details != "" {
		for _, para := range strings.Split(strings.TrimSpace(h.Details), "\n\n") {
			fmt.Fprintln(w)
			fmt.Fprint(w, wrap(para, helpWidth, ""))
		}
	}
	if len(h.Examples) > 0 {
		fmt.Fprintln(w, "\nexamples:")
		for _, ex := range h.Examples {
			fmt.Fprintf(w, "  %s\n", ex)
		}
	}
	type line struct{ name, text string }
	byGroup := map[string][]line{}
	column, first := 0, ""
	f.VisitAll(func(fl *flag.Flag) {
		l := line{name: "--" + fl.Name, text: f.describe(fl)}
		if meta := metavar(fl); meta != "" {
			l.name += " " + meta
		}
		if len(l.name) <= maxFlagColumn {
			column = max(column, len(l.name))
		}
		if first == "" || (!f.isRequired(first) && f.isRequired(fl.Name)) {
			first = fl.Name // the example variable: the first required flag, else the first
		}
		byGroup[f.groupOf[fl.Name]] = append(byGroup[f.groupOf[fl.Name]], l)
	})
	for _, g := range f.groups {
		fmt.Fprintf(w, "\n%s:\n", g)
		for _, l := range byGroup[g] {
			indent := strings.Repeat(" ", 2+column+2)
			if len(l.name) > column {
				fmt.Fprintf(w, "  %s\n%s", l.name, wrap(l.text, helpWidth, indent))
				continue
			}
			text := wrap(l.text, helpWidth, indent)
			fmt.Fprintf(w, "  %-*s  %s", column, l.name, strings.TrimPrefix(text, indent))
		}
	}
	if first != "" {
		fmt.Fprintf(w, "\nEvery flag can also be set as GATEWAY_<FLAG> (%s for --%s); the command line wins.\n", EnvName(first), first)
	}
	exit := "exit status: 0 done; 2 a flag or argument refused"
	if h.Exit != "" {
		exit += "; " + h.Exit
	}
	fmt.Fprint(w, strings.TrimPrefix(wrap(exit, helpWidth, "  "), "  "))
}

// synopsis is the command's name and its usage line.
func (f *FlagSet) synopsis() string { return strings.TrimSpace(f.Name() + " " + f.help.Usage) }

// describe is a flag's text in the help: its usage, its default when it has one, and
// "(required)".
func (f *FlagSet) describe(fl *flag.Flag) string {
	_, text := flag.UnquoteUsage(fl)
	if !zeroDefault(fl.DefValue) {
		def := fl.DefValue
		if fmt.Sprintf("%T", fl.Value) == "*flag.stringValue" {
			def = fmt.Sprintf("%q", def)
		}
		text += " (default " + def + ")"
	}
	if f.isRequired(fl.Name) {
		text += " (required)"
	}
	return text
}

func (f *FlagSet) isRequired(name string) bool { return slices.Contains(f.required, name) }

func zeroDefault(v string) bool {
	switch v {
	case "", "0", "false", "0s", "[]":
		return true
	}
	return false
}

// metavar is what a flag's value is, in the help: the word its usage quotes in backquotes
// (`FILE`), else a name for its type; "" for a boolean flag.
func metavar(fl *flag.Flag) string {
	name, _ := flag.UnquoteUsage(fl)
	switch name {
	case "":
		return ""
	case "int", "int64", "uint", "uint64":
		return "N"
	case "float":
		return "NUMBER"
	case "duration":
		return "DURATION"
	case "string", "value":
		return "VALUE"
	}
	return name
}

// wrap breaks text into lines of at most width columns (a longer word stays whole), each
// starting with indent and ending in a newline. Lines of text that start with a space are kept
// as they are (examples, tables).
func wrap(text string, width int, indent string) string {
	var b strings.Builder
	for _, raw := range strings.Split(text, "\n") {
		if strings.HasPrefix(raw, " ") {
			b.WriteString(indent + raw + "\n")
			continue
		}
		line := indent
		for _, word := range strings.Fields(raw) {
			if len(line) > len(indent) && len(line)+1+len(word) > width {
				b.WriteString(line + "\n")
				line = indent
			}
			if len(line) > len(indent) {
				line += " "
			}
			line += word
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
