package shard

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestSplitRanges(t *testing.T) {
	for _, size := range []int{1, 2, 3, 10, 99, 1000, 12345} {
		path := writeFile(t, "f.csv", strings.Repeat("x", size))
		for _, k := range []int{1, 2, 3, 7, 10, 64, 1000, 20000} {
			refs, err := SplitRanges(path, k)
			if err != nil {
				t.Fatal(err)
			}
			if want := min(k, size); len(refs) != want {
				t.Fatalf("size %d, k %d: %d ranges, want %d", size, k, len(refs), want)
			}
			var off int64
			lo, hi := int64(size), int64(0)
			for i, r := range refs {
				if r.Index != i || r.Source != path || r.Offset != off || r.Length <= 0 || r.Rows != -1 {
					t.Fatalf("size %d, k %d: range %d is %+v", size, k, i, r)
				}
				off += r.Length
				lo, hi = min(lo, r.Length), max(hi, r.Length)
			}
			if off != int64(size) || hi-lo > 1 {
				t.Fatalf("size %d, k %d: ranges cover %d bytes, lengths %d to %d", size, k, off, lo, hi)
			}
		}
	}
}

func TestSplitRangesErrors(t *testing.T) {
	dir := t.TempDir()
	gz := writeFileIn(t, dir, "d.csv.gz", "1,2\n")
	_, err := SplitRanges(gz, 4)
	checkParseError(t, err, gz, 0, 0, "gzip file cannot be split", "coordinator import")
	_, err = ReadRange(gz, Ref{Offset: 0, Length: 3}, CSVOptions{})
	checkParseError(t, err, gz, 0, 0, "gzip file cannot be split")

	empty := writeFileIn(t, dir, "empty.csv", "")
	_, err = SplitRanges(empty, 4)
	checkParseError(t, err, empty, 0, 0, "file is empty")

	plain := writeFileIn(t, dir, "d.csv", "1,2\n")
	for _, k := range []int{0, -1} {
		if _, err := SplitRanges(plain, k); err == nil || !strings.Contains(err.Error(), "at least 1") {
			t.Errorf("k=%d: got %v", k, err)
		}
	}
	if _, err := SplitRanges(dir+"/missing.csv", 2); err == nil || !strings.Contains(err.Error(), "missing.csv") {
		t.Errorf("missing file: got %v", err)
	}
	_, err = ReadRange(plain, Ref{Offset: 2, Length: 10}, CSVOptions{})
	checkParseError(t, err, plain, 0, 0, "past the end of the file", "split it again")
	_, err = ReadRange(plain, Ref{Offset: 4, Length: 1}, CSVOptions{})
	checkParseError(t, err, plain, 0, 0, "past the end")
	if _, err := ReadRange(plain, Ref{Offset: -1, Length: 1}, CSVOptions{}); err == nil {
		t.Error("negative offset accepted")
	}
}

// randomCSV returns a random CSV file of about rows rows and w columns, with random
// formatting: header, CRLF endings, blank lines, spaces, quotes, trailing newline.
func randomCSV(rng *rand.Rand, rows, w int, header, crlf, trailing bool) string {
	eol := "\n"
	if crlf {
		eol = "\r\n"
	}
	var b strings.Builder
	blank := func() {
		for rng.IntN(8) == 0 {
			b.WriteString([]string{"", " ", "\t", "  "}[rng.IntN(4)])
			b.WriteString(eol)
		}
	}
	field := func(s string) string {
		switch rng.IntN(6) {
		case 0:
			return " " + s
		case 1:
			return `"` + s + `"`
		case 2:
			return s + "\t"
		}
		return s
	}
	var lines []string
	if header {
		names := make([]string, w)
		for j := range names {
			names[j] = field("c" + strconv.Itoa(j))
		}
		lines = append(lines, strings.Join(names, ","))
	}
	for i := 0; i < rows; i++ {
		f := make([]string, w)
		for j := range f {
			v := rng.NormFloat64() * 1000
			f[j] = field(strconv.FormatFloat(v, 'g', 1+rng.IntN(17), 64))
		}
		lines = append(lines, strings.Join(f, ","))
	}
	for i, l := range lines {
		blank()
		b.WriteString(l)
		if i < len(lines)-1 || trailing {
			b.WriteString(eol)
		}
	}
	if trailing {
		blank()
	}
	return b.String()
}

// readAllRanges reads every range of path with k splits and returns the concatenation, or
// the first error in range order.
func readAllRanges(t testing.TB, path string, k int, opts CSVOptions) (*Table, error) {
	t.Helper()
	refs, err := SplitRanges(path, k)
	if err != nil {
		return nil, err
	}
	var tabs []*Table
	for _, r := range refs {
		tab, err := ReadRange(path, r, opts)
		if err != nil {
			return nil, err
		}
		tabs = append(tabs, tab)
	}
	return concat(tabs), nil
}

func TestReadRangeMatchesReadCSV(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	dir := t.TempDir()
	for trial := 0; trial < 120; trial++ {
		header, crlf, trailing := rng.IntN(2) == 0, rng.IntN(2) == 0, rng.IntN(2) == 0
		rows, w := 1+rng.IntN(40), 2+rng.IntN(4)
		content := randomCSV(rng, rows, w, header, crlf, trailing)
		path := writeFileIn(t, dir, fmt.Sprintf("r%d.csv", trial), content)
		opts := CSVOptions{Header: header}
		switch rng.IntN(4) {
		case 0:
			opts.Target = "0"
		case 1:
			opts.NoTarget = true
		}
		want, err := ReadCSV(strings.NewReader(content), path, opts)
		if err != nil {
			t.Fatalf("trial %d: %v\n%q", trial, err, content)
		}
		ks := []int{1, 2, 3, 4, 5, 7, 8, 13, 16, 31, 64, 100}
		if trial%5 == 0 {
			ks = append(ks, len(content)) // every byte a range: every possible cut
		}
		for _, k := range ks {
			got, err := readAllRanges(t, path, k, opts)
			if err != nil {
				t.Fatalf("trial %d, k %d: %v\n%q", trial, k, err, content)
			}
			if diff := equalTables(got, want); diff != "" {
				t.Fatalf("trial %d, k %d (header %v, crlf %v, trailing %v): %s\n%q",
					trial, k, header, crlf, trailing, diff, content)
			}
		}
	}
}

// TestReadRangeErrorLines checks that a bad row is reported by exactly one range, with the
// true file line, exactly as ReadCSV reports it.
func TestReadRangeErrorLines(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	dir := t.TempDir()
	for trial := 0; trial < 100; trial++ {
		header, crlf := rng.IntN(2) == 0, rng.IntN(2) == 0
		content := randomCSV(rng, 5+rng.IntN(30), 3, header, crlf, true)
		lines := strings.SplitAfter(content, "\n")
		// Spoil one non-blank data line.
		var cand []int
		for i, l := range lines {
			if strings.TrimSpace(l) != "" {
				cand = append(cand, i)
			}
		}
		if header {
			cand = cand[1:]
		}
		bad := cand[rng.IntN(len(cand))]
		if rng.IntN(2) == 0 {
			lines[bad] = strings.Replace(lines[bad], ",", ",oops", 1)
		} else {
			lines[bad] = strings.Replace(lines[bad], ",", "", 1)
		}
		content = strings.Join(lines, "")
		path := writeFileIn(t, dir, fmt.Sprintf("e%d.csv", trial), content)
		opts := CSVOptions{Header: header}
		_, want := ReadCSV(strings.NewReader(content), path, opts)
		checkParseError(t, want, path, bad+1, colOf(want), "fix or remove the row") // the column depends on the damage
		ks := []int{1, 2, 3, 5, 9, 17, 50}
		if trial%5 == 0 {
			ks = append(ks, len(content))
		}
		for _, k := range ks {
			refs, err := SplitRanges(path, k)
			if err != nil {
				t.Fatal(err)
			}
			var errs []error
			for _, r := range refs {
				if _, err := ReadRange(path, r, opts); err != nil {
					errs = append(errs, err)
				}
			}
			if len(errs) != 1 || errs[0].Error() != want.Error() {
				t.Fatalf("trial %d, k %d: range errors %v; want just %v", trial, k, errs, want)
			}
		}
	}
}

func colOf(err error) int {
	if pe, ok := err.(*ParseError); ok {
		return pe.Column
	}
	return -1
}

func TestReadRangeEdgeCases(t *testing.T) {
	dir := t.TempDir()

	t.Run("header only", func(t *testing.T) {
		path := writeFileIn(t, dir, "h.csv", "a,b,c\n")
		for k := 1; k <= 6; k++ {
			refs, err := SplitRanges(path, k)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range refs {
				tab, err := ReadRange(path, r, CSVOptions{Header: true, Target: "a"})
				if err != nil {
					t.Fatal(err)
				}
				if tab.N() != 0 || tab.D != 2 || tab.Columns[0] != "b" || tab.Target != "a" || tab.Source != path {
					t.Fatalf("k %d, %v: got %+v", k, r, tab)
				}
			}
		}
	})

	t.Run("blank file", func(t *testing.T) {
		path := writeFileIn(t, dir, "blank.csv", "\n\n  \n")
		refs, err := SplitRanges(path, 2)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ReadRange(path, refs[1], CSVOptions{})
		checkParseError(t, err, path, 0, 0, "file is empty")
	})

	t.Run("schema errors in every range", func(t *testing.T) {
		path := writeFileIn(t, dir, "s.csv", "a,b\n1,2\n3,4\n5,6\n")
		refs, err := SplitRanges(path, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range refs {
			_, err := ReadRange(path, r, CSVOptions{Header: true, Columns: []string{"nope"}})
			checkParseError(t, err, path, 1, 0, `"nope" is not in the header`)
		}
	})

	t.Run("whole file with length 0", func(t *testing.T) {
		content := "a,b\n1,2\n3,4\n"
		path := writeFileIn(t, dir, "w.csv", content)
		got, err := ReadRange(path, Ref{}, CSVOptions{Header: true})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ReadCSV(strings.NewReader(content), path, CSVOptions{Header: true})
		if diff := equalTables(got, want); diff != "" {
			t.Error(diff)
		}
		// From a middle offset to the end.
		got, err = ReadRange(path, Ref{Offset: 5}, CSVOptions{Header: true})
		if err != nil {
			t.Fatal(err)
		}
		if got.N() != 1 || got.Y[0] != 4 {
			t.Errorf("from offset 5: got %+v", got)
		}
	})

	t.Run("lines longer than the buffer", func(t *testing.T) {
		long := strings.Repeat("w", 3*readBufSize+17)
		var b strings.Builder
		for i := 0; i < 6; i++ {
			fmt.Fprintf(&b, "%d,%s,%d\n", i, long, i*i)
		}
		path := writeFileIn(t, dir, "long.csv", b.String())
		opts := CSVOptions{Columns: []string{"0"}}
		want, err := LoadCSV(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{1, 2, 5, 11, 40, 100} {
			got, err := readAllRanges(t, path, k, opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := equalTables(got, want); diff != "" {
				t.Fatalf("k %d: %s", k, diff)
			}
		}
	})

	t.Run("file changed", func(t *testing.T) {
		path := writeFileIn(t, dir, "c.csv", "1,2\n3,4\n5,6\n")
		refs, err := SplitRanges(path, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("1,2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = ReadRange(path, refs[1], CSVOptions{})
		checkParseError(t, err, path, 0, 0, "changed since it was split")
	})
}
