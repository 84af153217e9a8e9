// Package cli is the user-facing layer of the coordinator binary: its cobra commands parse
// flags, load data, run training through an engine and print results, tables or JSON. It is
// the only package that writes to the user; the rest log through zerolog.
package cli
