package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Command is one subcommand: its line in the program's usage, its help, and what runs it. Set
// one of Run, Main and Sub.
type Command struct {
	Name string
	// Summary is the command's line in the usage of its program.
	Summary string
	// Help is what the command's -h prints: Main builds the command's FlagSet with it, named as
	// the command line names the command ("gateway-worker status"), and hands it to Run.
	Help Help
	// Run defines the command's flags on fs, parses args with them (fs.Parse), and returns the
	// exit code.
	Run func(ctx context.Context, fs *FlagSet, args []string, stdout, stderr io.Writer) int
	// Main runs a command that reads its arguments itself, with no FlagSet from Help.
	Main func(ctx context.Context, args []string, stdout, stderr io.Writer) int
	// Sub are the subcommands of a command that has them ("dead ls"): Main picks one as it
	// picks the command.
	Sub []Command
	// Hidden commands are run by other commands (the bench's contenders), not by people: usage
	// leaves them out.
	Hidden bool
}

// Main runs the command of cmds that args[0] names with the rest of args. With no arguments
// it prints program's usage and returns 2; with -h, --help or help it prints it and returns 0;
// `help COMMAND [SUBCOMMAND]` is `COMMAND [SUBCOMMAND] -h`.
func Main(ctx context.Context, program string, cmds []Command, args []string, stdout, stderr io.Writer) int {
	if len(args) > 1 && args[0] == "help" {
		args = append(append([]string{}, args[1:]...), "-h")
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		Usage(stderr, program, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range cmds {
		if c.Name != args[0] {
			continue
		}
		name := program + " " + c.Name
		switch {
		case c.Sub != nil:
			return Main(ctx, name, c.Sub, args[1:], stdout, stderr)
		case c.Main != nil:
			return c.Main(ctx, args[1:], stdout, stderr)
		}
		return c.Run(ctx, NewFlagSet(name, stderr, c.Help), args[1:], stdout, stderr)
	}
	if strings.HasPrefix(args[0], "-") {
		// `dead --redis URL ls`: the flags belong to the command that follows.
		fmt.Fprintf(stderr, "%s: %q is a flag: give the command first, then its flags (%s <command> [flags])\n\n", program, args[0], program)
		Usage(stderr, program, cmds)
		return ExitUsage
	}
	if near := nearest(args[0], cmds); near != "" {
		fmt.Fprintf(stderr, "%s: unknown command %q; did you mean %q?\n\n", program, args[0], near)
	} else {
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n", program, args[0])
	}
	Usage(stderr, program, cmds)
	return ExitUsage
}

// Usage lists the commands people run, says where every flag can come from, and what the exit
// codes mean.
func Usage(w io.Writer, program string, cmds []Command) {
	fmt.Fprintf(w, "usage: %s <command> [flags]\n\ncommands:\n", program)
	width := 0
	for _, c := range cmds {
		if !c.Hidden {
			width = max(width, len(c.Name))
		}
	}
	for _, c := range cmds {
		if c.Hidden {
			continue
		}
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.Name, c.Summary)
	}
	fmt.Fprintln(w, "\nEvery flag can also be set as GATEWAY_<FLAG> (e.g. GATEWAY_CA_FILE); a flag on the command line wins.")
	fmt.Fprintln(w, "exit status: 0 done; 1 the answer is no (each command says what that means); 2 a flag or argument refused;")
	fmt.Fprintln(w, "3 a service it needs (Redis) could not be reached.")
	fmt.Fprintf(w, "Run '%s <command> -h' (or '%s help <command>') for a command's flags and examples.\n", program, program)
}

// Process runs main as this process's command: with the process's arguments (after the
// program name), its standard output and error, and a context that ends at the first SIGINT
// or SIGTERM. It returns main's exit code, for os.Exit.
func Process(main func(ctx context.Context, args []string, stdout, stderr io.Writer) int) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return main(ctx, os.Args[1:], os.Stdout, os.Stderr)
}
