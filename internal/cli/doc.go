// Package cli is the user-facing layer of the coordinator and worker binaries: its cobra
// commands parse flags, load data, run training through an engine and print results as
// tables, JSON or YAML (-o, one helper in output.go). It is the only package that writes to
// the user; the rest log through zerolog. Errors map to the process exit code in one place
// (exitCode in exitcode.go): usage errors, missing jobs and files, rejected credentials and
// unreachable coordinators have codes of their own.
package cli
