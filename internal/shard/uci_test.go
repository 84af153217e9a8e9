package shard

import (
	"compress/gzip"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readMaskIndependently parses a test mask with encoding/csv, as a cross-check.
func readMaskIndependently(t *testing.T, path string, split int) []bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(zr).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]bool, len(recs))
	for i, r := range recs {
		out[i] = strings.TrimSpace(r[split]) == "1"
	}
	return out
}

func TestLoadUCIShared(t *testing.T) {
	root := filepath.Join(sharedData(t), "uci")
	for _, ds := range []struct {
		name string
		n, d int
	}{
		{"challenger", 23, 4},
		{"yacht", 308, 6},
		{"housing", 506, 13},
		{"concrete", 1030, 8},
	} {
		t.Run(ds.name, func(t *testing.T) {
			dir := filepath.Join(root, ds.name)
			all, err := LoadCSV(filepath.Join(dir, "data.csv.gz"), CSVOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if all.N() != ds.n || all.D != ds.d {
				t.Fatalf("data has %d rows of %d inputs, want %d of %d", all.N(), all.D, ds.n, ds.d)
			}
			for split := 0; split < UCISplits; split++ {
				train, test, err := LoadUCI(dir, split)
				if err != nil {
					t.Fatal(err)
				}
				wantSource := filepath.Join(dir, "data.csv.gz")
				for _, tab := range []*Table{train, test} {
					if tab.Source != wantSource || tab.D != ds.d || tab.Target != "y" || len(tab.Columns) != ds.d ||
						tab.Columns[0] != "x0" || len(tab.X) != tab.N()*tab.D {
						t.Fatalf("split %d: bad table header %q %q %d %q", split, tab.Source, tab.Columns, tab.D, tab.Target)
					}
				}
				if train.N()+test.N() != ds.n || test.N() == 0 || test.N() > ds.n/5+1 {
					t.Fatalf("split %d: %d train + %d test rows of %d", split, train.N(), test.N(), ds.n)
				}
				// Every row lands in the set its mask flag says, in file order.
				mask := readMaskIndependently(t, filepath.Join(dir, "test_mask.csv.gz"), split)
				var i, j int
				for r, isTest := range mask {
					src, k := train, &i
					if isTest {
						src, k = test, &j
					}
					if !slices.Equal(src.Row(*k), all.Row(r)) || src.Y[*k] != all.Y[r] {
						t.Fatalf("split %d: row %d of the data is not row %d of its set", split, r, *k)
					}
					*k++
				}
			}
		})
	}
}

func TestLoadUCIErrors(t *testing.T) {
	const data = "1,2,3\n4,5,6\n7,8,9\n"
	mask := func(rows ...string) string { return strings.Join(rows, "\n") + "\n" }
	ten := func(s string) string { return strings.Repeat(s+",", 9) + s }
	good := mask(ten("0"), ten("1"), ten("0"))
	for _, tc := range []struct {
		name      string
		data      string
		mask      string
		split     int
		file      string // data or mask; "" for a plain error
		line, col int
		want      []string
	}{
		{"split negative", data, good, -1, "", 0, 0, []string{"split -1 is out of range", "0 to 9"}},
		{"split 10", data, good, 10, "", 0, 0, []string{"split 10 is out of range"}},
		{"split beyond mask columns", data, mask("0,1", "1,0", "0,0"), 4, "mask", 1, 0,
			[]string{"split 4 is out of range", "mask has 2 columns", "0 to 1"}},
		{"mask too short", data, mask(ten("0"), ten("1")), 0, "mask", 0, 0,
			[]string{"mask has 2 rows", "has 3", "match row for row"}},
		{"mask too long", data, mask(ten("0"), ten("1"), ten("0"), ten("0")), 0, "mask", 0, 0,
			[]string{"mask has 4 rows"}},
		{"mask value 2", data, mask(ten("0"), "0,0,0,2,0,0,0,0,0,0", ten("0")), 0, "mask", 2, 4,
			[]string{"mask value (1 bytes, with symbols or digits) is neither 0 nor 1", "fix the mask"}},
		{"mask value 0.5", data, mask(ten("0"), ten("0.5"), ten("0")), 0, "mask", 2, 1, []string{"(3 bytes, with symbols or digits) is neither 0 nor 1"}},
		{"mask not a number", data, mask(ten("0"), ten("0"), ten("x")), 0, "mask", 3, 1, []string{"(1 bytes, with letters) is not a number"}},
		{"mask ragged", data, mask(ten("0"), "0,1", ten("0")), 0, "mask", 2, 0, []string{"expected 10", "got 2"}},
		{"mask empty", data, "", 0, "mask", 0, 0, []string{"mask is empty"}},
		{"all test", data, mask(ten("1"), ten("1"), ten("1")), 3, "mask", 0, 0, []string{"no training rows"}},
		{"bad data", "1,2,3\n4,x,6\n", good, 0, "data", 2, 2, []string{"(1 bytes, with letters) is not a number"}},
		{"empty data", "", good, 0, "data", 0, 0, []string{"file is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dataPath := writeFileIn(t, dir, "data.csv.gz", tc.data)
			maskPath := writeFileIn(t, dir, "test_mask.csv.gz", tc.mask)
			train, test, err := LoadUCI(dir, tc.split)
			if err == nil {
				t.Fatalf("no error; got %d train and %d test rows", train.N(), test.N())
			}
			switch tc.file {
			case "data":
				checkParseError(t, err, dataPath, tc.line, tc.col, tc.want...)
			case "mask":
				checkParseError(t, err, maskPath, tc.line, tc.col, tc.want...)
			default:
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
			}
		})
	}

	t.Run("missing mask", func(t *testing.T) {
		dir := t.TempDir()
		writeFileIn(t, dir, "data.csv.gz", data)
		if _, _, err := LoadUCI(dir, 0); err == nil || !strings.Contains(err.Error(), "test_mask.csv.gz") {
			t.Errorf("got %v", err)
		}
	})

	t.Run("synthetic split", func(t *testing.T) {
		dir := t.TempDir()
		writeFileIn(t, dir, "data.csv.gz", data)
		writeFileIn(t, dir, "test_mask.csv.gz", mask(ten("0"), "0,1,0,0,0,0,0,0,0,0", "0,1,0,0,0,0,0,0,0,1"))
		train, test, err := LoadUCI(dir, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(train.X, []float64{1, 2}) || !slices.Equal(train.Y, []float64{3}) ||
			!slices.Equal(test.X, []float64{4, 5, 7, 8}) || !slices.Equal(test.Y, []float64{6, 9}) {
			t.Errorf("train %+v, test %+v", train, test)
		}
		train, test, err = LoadUCI(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		if train.N() != 3 || test.N() != 0 {
			t.Errorf("split 0: %d train, %d test rows; want 3 and 0", train.N(), test.N())
		}
	})
}
