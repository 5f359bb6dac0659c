// Package proctest runs commands and processes for tests: a command's main run in-process with
// its exit code and outputs, the output files of the processes a test starts (counted and
// waited on across files), and a buffer several goroutines may write while a test reads it.
package proctest
