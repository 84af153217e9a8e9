package shard

import (
	"bytes"
	"errors"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzSeeds are good and bad inputs for the fuzz targets.
var fuzzSeeds = []string{
	"1,2,3\n4,5,6\n",
	"\"year\",\"ppm\"\n1959,315.42\n1959.08,316.31\n",
	"a,b\r\n1,2\r\n\r\n3,4",
	"\xef\xbb\xbfa,b\n1,2\n",
	" 1 , \"2\" ,3\n\n\t\n4,5,6",
	"1,2\n3\n",
	"1,NaN\n",
	"Inf,1\n",
	"1e400,2\n",
	"a,a\n1,2\n",
	"a,,b\n1,2,3\n",
	"",
	"\n\n",
	"a,b\n",
	"x,y\n1,abc\n",
	"1,,2\n",
	"\"1,5\",2\n",
	"1,2\r3,4\r",
	"\"\",\"\n\"",
	",,,\n,,,\n",
	"0x1p-2,1_0,-.5e-3\n",
}

// checkTable checks the invariants of a table ReadCSV returned.
func checkTable(t *testing.T, tab *Table, noTarget bool) {
	t.Helper()
	if tab.D < 1 || len(tab.Columns) != tab.D || tab.N() < 1 || len(tab.X) != tab.N()*tab.D || (tab.Target == "") != noTarget {
		t.Fatalf("bad shape: D %d, columns %q, %d rows, %d values", tab.D, tab.Columns, tab.N(), len(tab.X))
	}
	for i, v := range tab.X {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("X[%d] = %v", i, v)
		}
	}
	for i, v := range tab.Y {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("Y[%d] = %v", i, v)
		}
	}
}

func FuzzReadCSV(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), false, "", "", false)
		f.Add([]byte(s), true, "", "", false)
	}
	f.Add([]byte("a,b,c\n1,2,3\n"), true, "a", "c;1", false)
	f.Add([]byte("a,b,c\n1,2,3\n"), true, "zz", "", false)
	f.Add([]byte("1,2,3\n"), false, "0", "2", false)
	f.Add([]byte("1,2,3\n"), false, "7", "-1", false)
	f.Add([]byte("1,2,3\n"), false, "", "", true)
	f.Add([]byte("a,b\n1,2\n"), true, "", "b", true)
	f.Fuzz(func(t *testing.T, data []byte, header bool, target, columns string, noTarget bool) {
		opts := CSVOptions{Header: header, Target: target, NoTarget: noTarget}
		if columns != "" {
			opts.Columns = strings.Split(columns, ";")
		}
		tab, err := ReadCSV(bytes.NewReader(data), "fuzz.csv", opts)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != "fuzz.csv" || !strings.HasPrefix(err.Error(), "fuzz.csv") {
				t.Fatalf("error %q (%T) is not a *ParseError naming the file", err, err)
			}
			return
		}
		checkTable(t, tab, noTarget)
		if noTarget {
			for _, y := range tab.Y {
				if y != 0 {
					t.Fatalf("Y = %v without a target", tab.Y)
				}
			}
		}
	})
}

// FuzzReadRange checks that the byte ranges of a file read its rows exactly once, and
// report its first error exactly as ReadCSV does.
func FuzzReadRange(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), i%2 == 0, uint8(i+1), i%3 == 0)
	}
	// One file, rewritten by each run: the runs of a fuzzing process are sequential.
	path := filepath.Join(f.TempDir(), "fuzz.csv")
	f.Fuzz(func(t *testing.T, data []byte, header bool, k uint8, noTarget bool) {
		checkRanges(t, path, data, CSVOptions{Header: header, NoTarget: noTarget}, int(k)+1)
	})
}

// FuzzBoundedRanges is FuzzReadRange with small line and field bounds: a file's byte
// ranges fail on a line over the bound, or a row with too many fields, exactly as ReadCSV
// does, whichever range meets it.
func FuzzBoundedRanges(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), i%2 == 0, uint8(i+1), uint8(i))
	}
	f.Add([]byte("a,b\n1,2\n"+strings.Repeat("9", 300)+"\n3,4\n"), true, uint8(5), uint8(40))
	f.Add([]byte(strings.Repeat("9", 300)), false, uint8(3), uint8(10))
	f.Add([]byte("a,b\n"+strings.Repeat("1,", 30)+"1\n"), true, uint8(2), uint8(3))
	f.Add([]byte("a,b\n1,2\n"+strings.Repeat(" ", 100)+"\n3,4\n"), true, uint8(9), uint8(0))
	path := filepath.Join(f.TempDir(), "fuzz.csv")
	f.Fuzz(func(t *testing.T, data []byte, header bool, k, bound uint8) {
		opts := CSVOptions{Header: header, MaxLineBytes: 4 + int(bound), MaxFields: 1 + int(bound%8)}
		checkRanges(t, path, data, opts, int(k)+1)
	})
}

// checkRanges writes data to path and checks that its k byte ranges read its rows exactly
// once, and report its first error exactly as ReadCSV does.
func checkRanges(t *testing.T, path string, data []byte, opts CSVOptions, k int) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	whole, werr := ReadCSV(bytes.NewReader(data), path, opts)
	refs, err := SplitRanges(path, k)
	if err != nil {
		if werr == nil {
			t.Fatalf("SplitRanges failed (%v) where ReadCSV succeeded", err)
		}
		return
	}
	var tabs []*Table
	var first error
	for _, r := range refs {
		tab, err := ReadRange(path, r, opts)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		tabs = append(tabs, tab)
	}
	switch {
	case werr == nil && first != nil:
		t.Fatalf("range error %v where ReadCSV succeeded", first)
	case werr == nil:
		if diff := equalTables(concat(tabs), whole); diff != "" {
			t.Fatalf("ranges differ from ReadCSV: %s", diff)
		}
	case first != nil:
		if first.Error() != werr.Error() {
			t.Fatalf("first range error %q, ReadCSV error %q", first, werr)
		}
	default:
		if n := concat(tabs).N(); n != 0 {
			t.Fatalf("ReadCSV failed (%v) but the ranges read %d rows without error", werr, n)
		}
	}
}

// FuzzSplitHead checks that the ranges of a file's head read its first rows, as ReadCSV
// reads them.
func FuzzSplitHead(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), i%2 == 0, uint8(i%3), uint8(i+1))
	}
	f.Add([]byte("a,b\n1,2\n\n3,4\n5,6"), true, uint8(2), uint8(3))
	path := filepath.Join(f.TempDir(), "fuzz.csv")
	f.Fuzz(func(t *testing.T, data []byte, header bool, rows, k uint8) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		opts := CSVOptions{Header: header}
		refs, err := SplitHead(path, opts, int(rows)+1, int(k)+1)
		if err != nil {
			return
		}
		whole, werr := ReadCSV(bytes.NewReader(data), path, opts)
		var tabs []*Table
		for _, r := range refs {
			tab, err := ReadRange(path, r, opts)
			if err != nil {
				if werr == nil {
					t.Fatalf("range %v: %v where ReadCSV succeeded", r, err)
				}
				return
			}
			tabs = append(tabs, tab)
		}
		if werr != nil {
			return // the error lies in the test rows
		}
		if diff := equalTables(concat(tabs), whole.Slice(0, int(rows)+1)); diff != "" {
			t.Fatalf("the head's ranges differ from ReadCSV's first %d rows: %s", int(rows)+1, diff)
		}
	})
}

// FuzzAccessURL checks that allow-list patterns and URLs never panic, and that an allowed
// URL matches its pattern's host.
func FuzzAccessURL(f *testing.F) {
	for _, s := range [][2]string{
		{"https://data.example.com/sets/", "https://data.example.com/sets/a.csv"},
		{"*.example.com", "http://a.example.com:80/x"},
		{"10.0.0.5:8080", "http://10.0.0.5:8080/"},
		{"[::1]", "http://[::1]:1/"},
		{"https://x/", "https://x/../y"},
		{"x", "http://u:p@x/"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, rawURL string) {
		acc, err := NewAccess([]string{t.TempDir()}, []string{pattern}, false)
		if err != nil {
			return
		}
		u, err := url.Parse(rawURL)
		if err != nil {
			return
		}
		if acc.checkURL(u) != nil {
			return
		}
		p := acc.URLs[0]
		if p.Scheme != "" && (p.Scheme != strings.ToLower(u.Scheme) || p.Host != strings.ToLower(u.Host)) {
			t.Fatalf("pattern %q allows %q", pattern, rawURL)
		}
	})
}
