package shard

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// UCISplits is the number of fixed train/test splits of a UCI dataset.
const UCISplits = 10

// The files of a UCI dataset directory.
const (
	uciData = "data.csv.gz"
	uciMask = "test_mask.csv.gz"
)

// LoadUCI reads a dataset in the UCI layout of ../shared/data/uci/NAME and returns the
// training and test rows of one of its fixed splits (0 to UCISplits-1).
//
// dir/data.csv.gz holds the rows, without a header, inputs first and the target in the last
// column; the inputs are named x0, x1, ... and the target y, and both tables have Source
// dir/data.csv.gz. dir/test_mask.csv.gz has one row of 0/1 flags per data row and one column
// per split: a 1 in column split marks a test row. Train and test rows keep their order in
// the file.
//
// A split outside [0, 9] or beyond the mask's columns, a mask whose row count differs from
// the data's, a mask value other than 0 or 1, and a split that leaves no training rows are
// errors.
func LoadUCI(dir string, split int) (train, test *Table, err error) {
	if split < 0 || split >= UCISplits {
		return nil, nil, fmt.Errorf("load %s: split %d is out of range: choose a split from 0 to %d", dir, split, UCISplits-1)
	}
	dataPath := filepath.Join(dir, uciData)
	maskPath := filepath.Join(dir, uciMask)
	all, err := LoadCSV(dataPath, CSVOptions{})
	if err != nil {
		return nil, nil, err
	}
	isTest, err := loadMask(maskPath, split)
	if err != nil {
		return nil, nil, err
	}
	if len(isTest) != all.N() {
		return nil, nil, &ParseError{File: maskPath, Msg: fmt.Sprintf(
			"the mask has %d rows but %s has %d: they must match row for row; use the mask that came with the data",
			len(isTest), dataPath, all.N())}
	}
	nTest := 0
	for _, b := range isTest {
		if b {
			nTest++
		}
	}
	if nTest == all.N() {
		return nil, nil, &ParseError{File: maskPath, Msg: fmt.Sprintf(
			"split %d marks every row as a test row, leaving no training rows: fix column %d of the mask",
			split, split+1)}
	}
	d := all.D
	train = &Table{Source: all.Source, Columns: all.Columns, Target: all.Target, D: d,
		X: make([]float64, 0, (all.N()-nTest)*d), Y: make([]float64, 0, all.N()-nTest)}
	test = &Table{Source: all.Source, Columns: all.Columns, Target: all.Target, D: d,
		X: make([]float64, 0, nTest*d), Y: make([]float64, 0, nTest)}
	for i, b := range isTest {
		dst := train
		if b {
			dst = test
		}
		dst.X = append(dst.X, all.Row(i)...)
		dst.Y = append(dst.Y, all.Y[i])
	}
	return train, test, nil
}

// loadMask reads a gzip-compressed 0/1 mask and returns column split as booleans. Every
// value of every column is checked.
func loadMask(path string, split int) ([]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := maybeGunzip(f, path)
	if err != nil {
		return nil, err
	}
	lr := newLineReader(bufio.NewReaderSize(r, readBufSize), path, 0, 0, CSVOptions{})
	var (
		out       []bool
		fields    [][]byte
		width     int
		firstLine int
	)
	for {
		line, _, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if fields, err = lr.fields(line, fields); err != nil {
			return nil, err
		}
		if width == 0 {
			width, firstLine = len(fields), lr.line
			if split >= width {
				return nil, &ParseError{File: path, Line: lr.line, Msg: fmt.Sprintf(
					"split %d is out of range: the mask has %d columns, so choose a split from 0 to %d",
					split, width, width-1)}
			}
		}
		if len(fields) != width {
			return nil, &ParseError{File: path, Line: lr.line, Msg: fmt.Sprintf(
				"wrong number of fields: expected %d, like the first row, on line %d, got %d: fix or remove the row",
				width, firstLine, len(fields))}
		}
		for j, fld := range fields {
			v, bad := parseNumber(fld)
			if bad == "" && v != 0 && v != 1 {
				bad = fmt.Sprintf("the mask value (%d bytes, %s) is neither 0 nor 1", len(fld), describeField(fld))
			}
			if bad != "" {
				return nil, &ParseError{File: path, Line: lr.line, Column: j + 1,
					Msg: bad + ": a test mask holds only 0 (train) and 1 (test); fix the mask"}
			}
		}
		out = append(out, parseBit(fields[split]))
	}
	if width == 0 {
		return nil, &ParseError{File: path, Msg: "the mask is empty: expected one row of 0/1 flags per data row"}
	}
	return out, nil
}

// parseBit returns whether a field already checked to be 0 or 1 is 1.
func parseBit(f []byte) bool {
	v, _ := parseNumber(f)
	return v == 1
}
