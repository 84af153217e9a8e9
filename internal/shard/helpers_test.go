package shard

import (
	"compress/gzip"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sharedData returns the shared data directory, skipping the test when it is missing
// (failing instead when CI=true). Other packages can copy it; see SharedDataDir.
func sharedData(t testing.TB) string {
	t.Helper()
	dir, err := SharedDataDir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return dir
}

// writeFile writes content to a new file name in a fresh temporary directory, gzipping it
// when name ends in .gz, and returns its path.
func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	return writeFileIn(t, t.TempDir(), name, content)
}

func writeFileIn(t testing.TB, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(name, ".gz") {
		zw := gzip.NewWriter(f)
		if _, err := zw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	} else if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkParseError checks that err is or wraps a *ParseError for file at line and column,
// whose text starts with the file:line:column prefix and contains every want.
func checkParseError(t testing.TB, err error, file string, line, col int, want ...string) *ParseError {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want a parse error containing %q", want)
	}
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %q (%T) is not a *ParseError", err, err)
	}
	if pe.File != file || pe.Line != line || pe.Column != col {
		t.Errorf("error %q at %s:%d:%d; want %s:%d:%d", err, pe.File, pe.Line, pe.Column, file, line, col)
	}
	prefix := file + ":"
	if line > 0 {
		prefix += strconv.Itoa(line) + ":"
		if col > 0 {
			prefix += strconv.Itoa(col) + ":"
		}
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix+" ") {
		t.Errorf("error %q does not start with %q", msg, prefix+" ")
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not contain %q", msg, w)
		}
	}
	if !strings.Contains(pe.Msg, ": ") {
		t.Errorf("error %q does not say what to change", msg)
	}
	return pe
}

// equalTables reports how a and b differ, or "" if they hold the same names and values.
func equalTables(a, b *Table) string {
	switch {
	case a.Source != b.Source:
		return "Source " + a.Source + " vs " + b.Source
	case !slices.Equal(a.Columns, b.Columns):
		return "Columns " + strings.Join(a.Columns, ",") + " vs " + strings.Join(b.Columns, ",")
	case a.Target != b.Target:
		return "Target " + a.Target + " vs " + b.Target
	case a.D != b.D:
		return "D " + strconv.Itoa(a.D) + " vs " + strconv.Itoa(b.D)
	case a.N() != b.N():
		return "N " + strconv.Itoa(a.N()) + " vs " + strconv.Itoa(b.N())
	case len(a.X) != len(b.X):
		return "len(X) " + strconv.Itoa(len(a.X)) + " vs " + strconv.Itoa(len(b.X))
	}
	for i := range a.X {
		if math.Float64bits(a.X[i]) != math.Float64bits(b.X[i]) {
			return "X[" + strconv.Itoa(i) + "]"
		}
	}
	for i := range a.Y {
		if math.Float64bits(a.Y[i]) != math.Float64bits(b.Y[i]) {
			return "Y[" + strconv.Itoa(i) + "]"
		}
	}
	return ""
}

// concat appends the rows of the tables, which must share names, into one table.
func concat(tabs []*Table) *Table {
	out := &Table{Source: tabs[0].Source, Columns: tabs[0].Columns, Target: tabs[0].Target, D: tabs[0].D,
		X: []float64{}, Y: []float64{}}
	for _, t := range tabs {
		out.X = append(out.X, t.X...)
		out.Y = append(out.Y, t.Y...)
	}
	return out
}
