package shard

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
)

// SplitRanges cuts the plain CSV file at path into k byte ranges of nearly equal length
// (they differ by at most one byte) that together cover the file, in file order, without
// reading it. The refs have Index 0..k-1, Source path and Rows -1. A file of fewer than k
// bytes gets one range per byte; no range is empty. The cuts ignore line boundaries:
// ReadRange assigns each line to the range holding its first byte, so a range may own no
// line at all.
//
// Gzip files cannot be split: SplitRanges refuses a path ending in ".gz". Read such a
// file with one reader (LoadCSV, or Plan, which cuts it into row ranges) or convert it to
// plain CSV with Import (`coordinator import`).
func SplitRanges(path string, k int) ([]Ref, error) {
	if err := notGzip(path); err != nil {
		return nil, err
	}
	if k < 1 {
		return nil, fmt.Errorf("split %s into %d ranges: the number of ranges must be at least 1", path, k)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("split %s: it is a directory, not a CSV file", path)
	}
	size := fi.Size()
	if size == 0 {
		return nil, &ParseError{File: path, Msg: "the file is empty: expected CSV data; check the path or add data"}
	}
	return splitSize(path, size, k), nil
}

func notGzip(path string) error {
	if strings.HasSuffix(path, ".gz") {
		return &ParseError{File: path, Msg: "a gzip file cannot be split into byte ranges: " +
			"submit it as it is (a gzipped CSV is read whole and cut into row ranges) or convert it to plain CSV with `coordinator import`"}
	}
	return nil
}

// ReadRange reads the rows of the plain CSV file at path that belong to the byte range
// [ref.Offset, ref.Offset+ref.Length), or to the end of the file when ref.Length is 0.
// ref.Source is not consulted; the table's Source is path.
//
// Each line belongs to the range holding its first byte, so the ranges of SplitRanges
// together read every line exactly once: a range that does not start at 0 skips the
// partial line it starts in (it discards everything up to and including the first '\n'
// at or after Offset-1), and the last line it owns is read to its end even past the
// range. A range may therefore own no rows; ReadRange then returns an empty table, which
// is not an error (an empty file as a whole is: see SplitRanges and ReadCSV).
//
// The schema comes from the start of the file whatever the range: with opts.Header the
// header is the first non-blank line, which the range owning it skips; without one the
// first row fixes the number of fields. Column selection, names and checks are those of
// ReadCSV, and errors carry true file line numbers. To know them, ReadRange counts the
// newlines before the range, reading the file from the start: O(Offset) work per range,
// so reading all k ranges of a file costs about k/2 extra passes over it in total. That
// is cheap next to parsing for the shard counts used in practice, and it keeps line
// numbers exact.
func ReadRange(path string, ref Ref, opts CSVOptions) (*Table, error) {
	if err := notGzip(path); err != nil {
		return nil, err
	}
	if ref.Offset < 0 || ref.Length < 0 {
		return nil, fmt.Errorf("read %s: invalid byte range: offset %d, length %d", path, ref.Offset, ref.Length)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	end := ref.Offset + ref.Length
	if ref.Length == 0 {
		end = size
	}
	if end > size || (ref.Offset > 0 && ref.Offset >= size) {
		return nil, &ParseError{File: path, Msg: fmt.Sprintf(
			"byte range %d-%d is past the end of the file (%d bytes): the file changed since it was split; split it again",
			ref.Offset, end, size)}
	}

	// The schema, from the header or first row at the start of the file.
	lr := newLineReader(bufio.NewReaderSize(io.NewSectionReader(f, 0, size), bufSize(size)), path, 0, 0, opts)
	s, fields, _, err := readSchema(lr, path, opts)
	if err != nil {
		return nil, err
	}
	var skipBefore int64 // lines starting before this offset are the header (or blank)
	if opts.Header {
		skipBefore = lr.pos
	}
	t := s.newTable()

	// Find the first line starting at or after Offset, and its line number.
	start, lines := int64(0), 0
	if ref.Offset > 0 {
		n, err := countNewlines(f, ref.Offset-1)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		skip := bufio.NewReaderSize(io.NewSectionReader(f, ref.Offset-1, size-(ref.Offset-1)), bufSize(end-ref.Offset+1))
		consumed := int64(0)
		maxLine, _ := opts.bounds()
		for {
			b, err := skip.ReadSlice('\n')
			consumed += int64(len(b))
			if err == nil {
				break
			}
			if consumed > int64(maxLine) {
				// The line the range starts in is too long; its owner fails on it too.
				return nil, tooLong(path, n+1, maxLine)
			}
			if err == io.EOF {
				return t, nil // the range starts in the file's last line, which it does not own
			}
			if err != bufio.ErrBufferFull {
				return nil, fmt.Errorf("read %s: %w", path, err)
			}
		}
		start, lines = ref.Offset-1+consumed, n+1
		if start >= end {
			return t, nil
		}
	}
	lr = newLineReader(bufio.NewReaderSize(io.NewSectionReader(f, start, size-start), bufSize(end-start)), path, start, lines, opts)
	if err := s.readRows(lr, t, end, skipBefore, fields); err != nil {
		return nil, err
	}
	return t, nil
}

// bufSize is the read buffer size for about n bytes: the default, or less for small files
// (bufio enforces its own minimum).
func bufSize(n int64) int { return int(max(16, min(n, readBufSize))) }

// countNewlines counts the '\n' bytes among the first n bytes of r.
func countNewlines(r io.ReaderAt, n int64) (int, error) {
	buf := make([]byte, min(n, 256<<10))
	count := 0
	for off := int64(0); off < n; {
		m := min(int64(len(buf)), n-off)
		k, err := r.ReadAt(buf[:m], off)
		count += bytes.Count(buf[:k], []byte{'\n'})
		off += int64(k)
		if err != nil && !(err == io.EOF && off >= n) {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
	return count, nil
}

// SplitHead cuts the first rows data rows of the plain CSV file at path (after its header,
// if opts.Header) into k byte ranges: exactly those SplitRanges cuts for a file that holds
// only the lines before the next data row, so ReadRange of each reads those rows, cut as a
// cluster cuts such a file. k <= 0 means one range per 8 MiB. It reads the file up to that
// row, with opts' bounds; a file with fewer than rows+1 data rows is an error (the rows
// after the head are the test rows).
func SplitHead(path string, opts CSVOptions, rows, k int) ([]Ref, error) {
	if err := notGzip(path); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lr := newLineReader(bufio.NewReaderSize(f, readBufSize), path, 0, 0, opts)
	_, _, first, err := readSchema(lr, path, opts)
	if err != nil {
		return nil, err
	}
	n := 0
	if !opts.Header {
		n = 1 // the first line is a data row
	}
	end := first
	for n <= rows {
		_, start, err := lr.next()
		if err == io.EOF {
			return nil, &ParseError{File: path, Msg: fmt.Sprintf("the file has %d data rows, not more than %d: keep rows for testing", n, rows)}
		}
		if err != nil {
			return nil, err
		}
		end, n = start, n+1
	}
	if end == 0 {
		return nil, &ParseError{File: path, Msg: "the head holds no rows"}
	}
	if k <= 0 {
		k = DefaultByteShards(end)
	}
	return splitSize(path, end, k), nil
}
