package shard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestReadCSV(t *testing.T) {
	long := strings.Repeat("z", 200<<10) // a line longer than the read buffer
	for _, tc := range []struct {
		name    string
		in      string
		opts    CSVOptions
		columns []string
		target  string
		x       []float64
		y       []float64
	}{
		{name: "plain", in: "1,2,3\n4,5,6\n",
			columns: []string{"x0", "x1"}, target: "y", x: []float64{1, 2, 4, 5}, y: []float64{3, 6}},
		{name: "no trailing newline", in: "1,2,3\n4,5,6",
			columns: []string{"x0", "x1"}, target: "y", x: []float64{1, 2, 4, 5}, y: []float64{3, 6}},
		{name: "crlf", in: "1,2,3\r\n4,5,6\r\n",
			columns: []string{"x0", "x1"}, target: "y", x: []float64{1, 2, 4, 5}, y: []float64{3, 6}},
		{name: "blank and whitespace lines", in: "\n  \n1,2,3\n\t\r\n\n4,5,6\n\n",
			columns: []string{"x0", "x1"}, target: "y", x: []float64{1, 2, 4, 5}, y: []float64{3, 6}},
		{name: "spaces and quotes", in: ` 1 , "2",  " 3 " ` + "\n\t4,\"5\"\t,6\n",
			columns: []string{"x0", "x1"}, target: "y", x: []float64{1, 2, 4, 5}, y: []float64{3, 6}},
		{name: "number syntax", in: "-1.5e3,+.25,1e-400\n0x1p-2,5.,0\n",
			columns: []string{"x0", "x1"}, target: "y", x: []float64{-1500, 0.25, 0.25, 5}, y: []float64{0, 0}},
		{name: "header quoted", in: "\"year\",\"ppm\"\n1959,315.42\n1959.5,316\n", opts: CSVOptions{Header: true},
			columns: []string{"year"}, target: "ppm", x: []float64{1959, 1959.5}, y: []float64{315.42, 316}},
		{name: "bom header", in: "\xef\xbb\xbfa,b\n1,2\n", opts: CSVOptions{Header: true},
			columns: []string{"a"}, target: "b", x: []float64{1}, y: []float64{2}},
		{name: "bom no header", in: "\xef\xbb\xbf1,2\n", columns: []string{"x0"}, target: "y", x: []float64{1}, y: []float64{2}},
		{name: "header after blank lines", in: "\n\na,b\n\n1,2\n", opts: CSVOptions{Header: true},
			columns: []string{"a"}, target: "b", x: []float64{1}, y: []float64{2}},
		{name: "target by name", in: "a,b,c\n1,2,3\n", opts: CSVOptions{Header: true, Target: "a"},
			columns: []string{"b", "c"}, target: "a", x: []float64{2, 3}, y: []float64{1}},
		{name: "target by index with header", in: "a,b,c\n1,2,3\n", opts: CSVOptions{Header: true, Target: "1"},
			columns: []string{"a", "c"}, target: "b", x: []float64{1, 3}, y: []float64{2}},
		{name: "target by index no header", in: "1,2,3\n", opts: CSVOptions{Target: "0"},
			columns: []string{"x1", "x2"}, target: "y", x: []float64{2, 3}, y: []float64{1}},
		{name: "header name wins over index", in: "2,0,1\n7,8,9\n", opts: CSVOptions{Header: true, Target: "0"},
			columns: []string{"2", "1"}, target: "0", x: []float64{7, 9}, y: []float64{8}},
		{name: "columns mixed and reordered", in: "a,b,c,d\n1,2,3,4\n5,6,7,8\n",
			opts:    CSVOptions{Header: true, Target: "b", Columns: []string{"d", "0"}},
			columns: []string{"d", "a"}, target: "b", x: []float64{4, 1, 8, 5}, y: []float64{2, 6}},
		{name: "columns by index no header", in: "1,2,3,4\n", opts: CSVOptions{Columns: []string{" 2 ", "0"}},
			columns: []string{"x2", "x0"}, target: "y", x: []float64{3, 1}, y: []float64{4}},
		{name: "unselected text column", in: "id,x,y\nabc,1,2\n,3,4\n",
			opts:    CSVOptions{Header: true, Columns: []string{"x"}},
			columns: []string{"x"}, target: "y", x: []float64{1, 3}, y: []float64{2, 4}},
		{name: "no target", in: "1,2\n3,4\n", opts: CSVOptions{NoTarget: true},
			columns: []string{"x0", "x1"}, target: "", x: []float64{1, 2, 3, 4}, y: []float64{0, 0}},
		{name: "no target, one column", in: "1\n3\n", opts: CSVOptions{NoTarget: true},
			columns: []string{"x0"}, target: "", x: []float64{1, 3}, y: []float64{0, 0}},
		{name: "no target, columns by name", in: "a,b,c\n1,2,3\n", opts: CSVOptions{Header: true, NoTarget: true, Columns: []string{"c", "a"}},
			columns: []string{"c", "a"}, target: "", x: []float64{3, 1}, y: []float64{0}},
		{name: "long unselected field", in: "1," + long + ",2\n3,w,4\n", opts: CSVOptions{Columns: []string{"0"}},
			columns: []string{"x0"}, target: "y", x: []float64{1, 3}, y: []float64{2, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadCSV(strings.NewReader(tc.in), "in.csv", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			want := &Table{Source: "in.csv", Columns: tc.columns, Target: tc.target, D: len(tc.columns), X: tc.x, Y: tc.y}
			if diff := equalTables(got, want); diff != "" {
				t.Errorf("got %+v\nwant %+v\n(%s)", got, want, diff)
			}
		})
	}
}

func TestReadCSVErrors(t *testing.T) {
	hdr := CSVOptions{Header: true}
	for _, tc := range []struct {
		name      string
		in        string
		opts      CSVOptions
		line, col int
		want      []string
	}{
		// Non-numeric fields.
		{"non-numeric", "a,b\n1,2\n3,abc\n", hdr, 3, 2, []string{"the field (3 bytes, with letters) is not a number", "fix or remove the row"}},
		{"non-numeric first column", "1,2\nx,2\n", CSVOptions{}, 2, 1, []string{"(1 bytes, with letters) is not a number"}},
		{"non-numeric target", "1,2\n1,?\n", CSVOptions{}, 2, 2, []string{"(1 bytes, with symbols or digits) is not a number"}},
		{"empty field", "1,,3\n", CSVOptions{}, 1, 2, []string{"the field is empty"}},
		{"quoted comma", "a,b\n\"1,5\",2\n", hdr, 2, 0, []string{"expected 2", "got 3"}},
		{"header read as data", "year,ppm\n1959,315\n", CSVOptions{}, 1, 1,
			[]string{"(4 bytes, with letters) is not a number", "read the file with a header"}},
		{"line numbers count blank lines", "1,2\n\n  \n\n3,x\n", CSVOptions{}, 5, 2, []string{"is not a number"}},
		{"crlf error", "1,2\r\n3,x\r\n", CSVOptions{}, 2, 2, []string{"(1 bytes, with letters) is not a number"}},
		{"lone carriage returns", "1,2\r3,4\r", CSVOptions{}, 1, 2, []string{"carriage return"}},
		{"long field described, not quoted", "1," + strings.Repeat("q", 500) + "\n", CSVOptions{}, 1, 2, []string{"(500 bytes, with letters) is not a number"}},
		// NaN and infinities.
		{"NaN", "1,2\n1,NaN\n", CSVOptions{}, 2, 2, []string{"the field is not a finite number"}},
		{"nan", "nan,2\n", CSVOptions{}, 1, 1, []string{"not a finite number"}},
		{"Inf", "1,2\nInf,2\n", CSVOptions{}, 2, 1, []string{"not a finite number"}},
		{"-Inf", "1,-Inf\n", CSVOptions{}, 1, 2, []string{"not a finite number"}},
		{"+infinity quoted", "1,\"+infinity\"\n", CSVOptions{}, 1, 2, []string{"not a finite number"}},
		{"overflow", "1e400,1\n", CSVOptions{}, 1, 1, []string{"the field is too large"}},
		// Ragged rows.
		{"too few fields", "1,2,3\n4,5\n", CSVOptions{}, 2, 0, []string{"expected 3", "got 2", "first row, on line 1"}},
		{"too many fields", "a,b\n1,2\n1,2,3\n", hdr, 3, 0, []string{"expected 2", "got 3", "header on line 1"}},
		{"trailing comma", "1,2\n1,2,\n", CSVOptions{}, 2, 0, []string{"expected 2", "got 3"}},
		// Empty files.
		{"empty", "", CSVOptions{}, 0, 0, []string{"file is empty"}},
		{"only blank lines", "\n \n\t\r\n", CSVOptions{}, 0, 0, []string{"file is empty"}},
		{"empty with header", "", hdr, 0, 0, []string{"file is empty", "header"}},
		{"header only", "a,b\n", hdr, 0, 0, []string{"no data rows after the header on line 1", "add data rows"}},
		{"header and blank lines", "\na,b\n\n\n", hdr, 0, 0, []string{"no data rows after the header on line 2"}},
		// Header problems.
		{"duplicate header", "a,b,a\n1,2,3\n", hdr, 1, 3, []string{"duplicate column name", "fields 1 and 3", "rename"}},
		{"duplicate quoted header", "\"x\", x ,y\n1,2,3\n", hdr, 1, 2, []string{"duplicate column name", "fields 1 and 2"}},
		{"empty header name", "a,,b\n1,2,3\n", hdr, 1, 2, []string{"empty column name"}},
		// Column selection.
		{"unknown column", "a,b,c\n1,2,3\n", CSVOptions{Header: true, Columns: []string{"a", "zz"}}, 1, 0,
			[]string{`input column "zz" is not in the header, which has 3 fields`, "index (0 to 2)"}},
		{"unknown target", "a,b\n1,2\n", CSVOptions{Header: true, Target: "ppm"}, 1, 0,
			[]string{`target column "ppm" is not in the header, which has 2 fields`}},
		{"name without header", "1,2\n", CSVOptions{Target: "ppm"}, 1, 0, []string{`"ppm" is given by name`, "header"}},
		{"index out of range", "1,2\n", CSVOptions{Columns: []string{"2"}}, 1, 0, []string{"index 2 is out of range", "0 to 1"}},
		{"negative index", "1,2\n", CSVOptions{Target: "-1"}, 1, 0, []string{"index -1 is out of range"}},
		{"target as input", "a,b\n1,2\n", CSVOptions{Header: true, Columns: []string{"a", "b"}}, 1, 0,
			[]string{"column index 1 is the target", "remove it"}},
		{"target as input by index", "1,2\n", CSVOptions{Target: "0", Columns: []string{"0"}}, 1, 0,
			[]string{"column index 0 is the target"}},
		{"input twice", "a,b,c\n1,2,3\n", CSVOptions{Header: true, Columns: []string{"a", "0"}}, 1, 0,
			[]string{"input column index 0 is selected twice"}},
		{"no inputs", "1\n2\n", CSVOptions{}, 1, 0, []string{"no inputs"}},
		{"target with no target", "1,2\n", CSVOptions{NoTarget: true, Target: "1"}, 1, 0,
			[]string{`target column "1" is given`, "no target"}},
		{"no inputs selected no target", "1,2\n", CSVOptions{NoTarget: true, Columns: []string{}}, 1, 0,
			[]string{"no input columns"}},
		{"no inputs selected", "1,2\n", CSVOptions{Columns: []string{}}, 1, 0, []string{"no input columns"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := ReadCSV(strings.NewReader(tc.in), "data.csv", tc.opts)
			if err == nil {
				t.Fatalf("no error; got table %+v", tab)
			}
			if tab != nil {
				t.Errorf("table %+v returned with error", tab)
			}
			checkParseError(t, err, "data.csv", tc.line, tc.col, tc.want...)
		})
	}
}

func TestParseErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    ParseError
		want string
	}{
		{ParseError{File: "data.csv", Line: 12, Column: 3, Msg: `field "abc" is not a number: fix or remove the row`},
			`data.csv:12:3: field "abc" is not a number: fix or remove the row`},
		{ParseError{File: "data.csv", Line: 12, Msg: "m: x"}, "data.csv:12: m: x"},
		{ParseError{File: "data.csv", Msg: "m: x"}, "data.csv: m: x"},
		{ParseError{File: "data.csv", Column: 4, Msg: "m: x"}, "data.csv: m: x"},
		{ParseError{Msg: "m: x"}, "m: x"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	inner := errors.New("boom")
	var err error = fmt.Errorf("job: %w", &ParseError{File: "f", Msg: "m", Err: inner})
	if !errors.Is(err, inner) {
		t.Error("errors.Is does not reach the underlying error")
	}
}

// errReader fails after returning its data.
type errReader struct {
	data []byte
	err  error
}

func (r *errReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestReadCSVReadError(t *testing.T) {
	boom := errors.New("disk on fire")
	_, err := ReadCSV(&errReader{data: []byte("1,2\n3,4\n5,"), err: boom}, "s.csv", CSVOptions{})
	checkParseError(t, err, "s.csv", 3, 0, "disk on fire", "check that the file is complete")
	if !errors.Is(err, boom) {
		t.Errorf("error %v does not wrap the read error", err)
	}
}

func TestLoadCSV(t *testing.T) {
	const content = "a,b,c\n1,2,3\n4,5,6\n"
	want, err := ReadCSV(strings.NewReader(content), "", CSVOptions{Header: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"d.csv", "d.csv.gz"} {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t, name, content)
			got, err := LoadCSV(path, CSVOptions{Header: true})
			if err != nil {
				t.Fatal(err)
			}
			want.Source = path
			if diff := equalTables(got, want); diff != "" {
				t.Error(diff)
			}
		})
	}

	t.Run("errors name the path", func(t *testing.T) {
		dir := t.TempDir()
		bad := writeFileIn(t, dir, "bad.csv.gz", "1,2\n3,oops\n")
		_, err := LoadCSV(bad, CSVOptions{})
		checkParseError(t, err, bad, 2, 2, "(4 bytes, with letters) is not a number")

		missing := filepath.Join(dir, "missing.csv")
		_, err = LoadCSV(missing, CSVOptions{})
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
			t.Errorf("missing file: got %v", err)
		}

		notGz := writeFileIn(t, dir, "plain.csv.gz", "")
		if err := os.WriteFile(notGz, []byte("1,2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = LoadCSV(notGz, CSVOptions{})
		checkParseError(t, err, notGz, 0, 0, "not a valid gzip file", "remove the .gz suffix")

		emptyGz := filepath.Join(dir, "empty.csv.gz")
		if err := os.WriteFile(emptyGz, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = LoadCSV(emptyGz, CSVOptions{})
		checkParseError(t, err, emptyGz, 0, 0, "empty")

		// A truncated gzip stream fails while reading, at the line being read.
		var buf bytes.Buffer
		big := strings.Repeat("1.2345,6.789\n", 20000)
		full := writeFileIn(t, dir, "full.csv.gz", big)
		b, err := os.ReadFile(full)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b[:len(b)/2])
		trunc := filepath.Join(dir, "trunc.csv.gz")
		if err := os.WriteFile(trunc, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = LoadCSV(trunc, CSVOptions{})
		var pe *ParseError
		if !errors.As(err, &pe) || pe.File != trunc || pe.Line < 1 || !errors.Is(err, io.ErrUnexpectedEOF) ||
			!strings.HasPrefix(err.Error(), fmt.Sprintf("%s:%d: ", trunc, pe.Line)) {
			t.Errorf("truncated gzip: got %v", err)
		}
	})
}

func TestLoadMaunaLoa(t *testing.T) {
	path := filepath.Join(sharedData(t), "maunaloa_co2.csv")
	tab, err := LoadCSV(path, CSVOptions{Header: true})
	if err != nil {
		t.Fatal(err)
	}
	if tab.N() != 468 || tab.D != 1 || !slices.Equal(tab.Columns, []string{"year"}) || tab.Target != "ppm" {
		t.Fatalf("got %d rows, D=%d, columns %q, target %q; want 468 rows of year -> ppm",
			tab.N(), tab.D, tab.Columns, tab.Target)
	}
	if tab.X[0] != 1959 || tab.Y[0] != 315.42 {
		t.Errorf("first row %v -> %v, want 1959 -> 315.42", tab.Row(0), tab.Y[0])
	}
	byName, err := LoadCSV(path, CSVOptions{Header: true, Target: "ppm", Columns: []string{"year"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := equalTables(tab, byName); diff != "" {
		t.Error(diff)
	}
}

// TestReadCSVAllocs guards against allocating per field or per row.
func TestReadCSVAllocs(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&b, "%d.5, %d, \"%g\",7e-3\n", i, i*3, float64(i)/7)
	}
	in := b.String()
	allocs := testing.AllocsPerRun(5, func() {
		if _, err := ReadCSV(strings.NewReader(in), "a", CSVOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 100 {
		t.Errorf("%v allocations to read 2000 rows; want far fewer than one per row", allocs)
	}
}

func BenchmarkReadCSV(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var sb strings.Builder
	const rows, cols = 100000, 10
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "%.6g", rng.NormFloat64()*100)
		}
		sb.WriteByte('\n')
	}
	in := sb.String()
	b.SetBytes(int64(len(in)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := ReadCSV(strings.NewReader(in), "bench", CSVOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
}
