package shard

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
)

// importBatch is how many rows Import holds before writing them.
const importBatch = 4096

// Import reads a CSV stream as ReadCSV does, checking every row, and writes the selected
// columns as plain CSV to w: a header of the input names and then the target name (each in
// double quotes, so it reads back as written), then
// one line per row with each value in the shortest form that parses back to the same
// float64 (strconv 'g', -1), so the rows read back bit for bit. Plain CSV is the format a
// cluster cuts into line-aligned byte ranges (DESIGN §5), so Import turns a gzipped CSV,
// which can only be read whole, into one whose shards workers read in parallel. It streams:
// memory stays bounded by the line bound and a batch of rows, whatever the input's size.
// It returns the number of rows written; errors are those of ReadCSV, or of writing.
func Import(r io.Reader, name string, opts CSVOptions, w io.Writer) (int, error) {
	lr := newLineReader(bufio.NewReaderSize(r, readBufSize), name, 0, 0, opts)
	s, fields, _, err := readSchema(lr, name, opts)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	var line []byte
	names := s.columns
	if s.targetName != "" {
		names = append(names[:len(names):len(names)], s.targetName)
	}
	for i, c := range names {
		if i > 0 {
			line = append(line, ',')
		}
		line = append(append(append(line, '"'), c...), '"')
	}
	line = append(line, '\n')
	if _, err := bw.Write(line); err != nil {
		return 0, fmt.Errorf("import %s: %w", name, err)
	}
	t := s.newTable()
	n := 0
	flush := func() error {
		for i := 0; i < t.N(); i++ {
			line = line[:0]
			for j, v := range t.Row(i) {
				if j > 0 {
					line = append(line, ',')
				}
				line = strconv.AppendFloat(line, v, 'g', -1, 64)
			}
			if s.target >= 0 {
				line = append(line, ',')
				line = strconv.AppendFloat(line, t.Y[i], 'g', -1, 64)
			}
			line = append(line, '\n')
			if _, err := bw.Write(line); err != nil {
				return fmt.Errorf("import %s: %w", name, err)
			}
		}
		n += t.N()
		t.X, t.Y = t.X[:0], t.Y[:0]
		return nil
	}
	if !opts.Header {
		if err := s.parseRow(t, lr.line, fields); err != nil {
			return 0, err
		}
	}
	for {
		l, _, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
		if fields, err = lr.fields(l, fields); err != nil {
			return 0, err
		}
		if err := s.parseRow(t, lr.line, fields); err != nil {
			return 0, err
		}
		if t.N() == importBatch {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	if err := flush(); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, &ParseError{File: name, Msg: fmt.Sprintf(
			"there are no data rows after the header on line %d: add data rows below the header", s.line)}
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("import %s: %w", name, err)
	}
	return n, nil
}

// ImportFile is Import of the CSV file at path, decompressed first when its name ends in
// ".gz"; errors name the path.
func ImportFile(path string, opts CSVOptions, w io.Writer) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r, err := maybeGunzip(f, path)
	if err != nil {
		return 0, err
	}
	return Import(r, path, opts, w)
}
