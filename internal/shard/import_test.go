package shard

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
)

// checkImport imports in and checks that the output reads back, with a header and the
// target last, to exactly the table ReadCSV reads from in; or that both fail alike.
func checkImport(t *testing.T, in []byte, opts CSVOptions) {
	t.Helper()
	want, werr := ReadCSV(bytes.NewReader(in), "in.csv", opts)
	var out bytes.Buffer
	n, err := Import(bytes.NewReader(in), "in.csv", opts, &out)
	if werr != nil {
		if err == nil || err.Error() != werr.Error() {
			t.Fatalf("Import error %v, ReadCSV error %v", err, werr)
		}
		return
	}
	if err != nil {
		t.Fatalf("Import: %v where ReadCSV succeeded", err)
	}
	back, err := ReadCSV(bytes.NewReader(out.Bytes()), "in.csv", CSVOptions{Header: true, NoTarget: opts.NoTarget})
	if err != nil {
		t.Fatalf("the output does not read back: %v\n%s", err, out.Bytes())
	}
	if n != want.N() {
		t.Fatalf("Import wrote %d rows, ReadCSV reads %d", n, want.N())
	}
	if diff := equalTables(back, want); diff != "" {
		t.Fatalf("the output reads back differently: %s", diff)
	}
}

// TestImport: the imported plain CSV reads back bit for bit as the input, whatever the
// columns selected, for inputs larger than a batch; bad input fails as ReadCSV fails.
func TestImport(t *testing.T) {
	var big strings.Builder
	big.WriteString("id,\"x one\",x2,y\n")
	for i := 0; i < 3*importBatch+17; i++ {
		v := math.Sin(float64(i)) * math.Pow(10, float64(i%40-20))
		fmt.Fprintf(&big, "row%d,%v,%.17g,%v\n", i, v, 1/float64(i+1), float64(i)/3)
	}
	for _, tc := range []struct {
		name string
		in   string
		opts CSVOptions
	}{
		{"many rows, by name", big.String(), CSVOptions{Header: true, Target: "y", Columns: []string{"x2", "x one"}}},
		{"no header", "1,2,3\n4,5.5,6e-300\n", CSVOptions{}},
		{"target first", "1,2,3\n4,5,6\n", CSVOptions{Target: "0"}},
		{"no target", "a,b\n1,2\n", CSVOptions{Header: true, NoTarget: true}},
		{"quoted names", "\"\"\"a\"\"\",b\n1,2\n", CSVOptions{Header: true}},
		{"bad field", "a,b\n1,2\n3,x\n", CSVOptions{Header: true}},
		{"header only", "a,b\n", CSVOptions{Header: true}},
		{"long line", "a,b\n1," + strings.Repeat("1", 100) + "\n", CSVOptions{Header: true, MaxLineBytes: 50}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkImport(t, []byte(tc.in), tc.opts) })
	}
	// A gzipped file, through ImportFile.
	gz := writeFile(t, "in.csv.gz", "a,b,y\n1,2,3\n4,5,6\n")
	var out bytes.Buffer
	if n, err := ImportFile(gz, CSVOptions{Header: true}, &out); err != nil || n != 2 || out.String() != "\"a\",\"b\",\"y\"\n1,2,3\n4,5,6\n" {
		t.Errorf("ImportFile of a gzipped CSV: %d rows, %v:\n%s", n, err, out.String())
	}
}

// FuzzImport checks that an import reads back as its input, or fails as ReadCSV fails.
func FuzzImport(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), false, false)
		f.Add([]byte(s), true, false)
	}
	f.Add([]byte("\"a\",\" b \"\n1,2\n"), true, true)
	f.Fuzz(func(t *testing.T, data []byte, header, noTarget bool) {
		checkImport(t, data, CSVOptions{Header: header, NoTarget: noTarget})
	})
}
