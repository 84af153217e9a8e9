package shard

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// CSVOptions says how to read a CSV file.
//
// The format is deliberately simple: one row per line ('\n' or "\r\n" endings), fields
// separated by commas, whitespace around a field ignored, and one pair of double quotes
// around a field removed (as in the header `"year","ppm"`). Quoted fields cannot contain
// commas or line breaks. Blank lines are skipped but still counted for line numbers, and a
// UTF-8 byte order mark at the start of the file is ignored. Every selected field must be a
// finite number in a syntax strconv.ParseFloat accepts; NaN and ±Inf, in any spelling, are
// rejected. Fields that are neither an input nor the target are not parsed, so they may
// hold text, but every row must have the same number of fields.
type CSVOptions struct {
	// Header says the first non-blank line holds column names. The names must be
	// non-empty and distinct.
	Header bool
	// Target selects the target column, by header name or by 0-based column index written
	// in decimal ("3"). A header name takes precedence over an index of the same spelling.
	// The empty string selects the last column.
	Target string
	// Columns selects the input columns, in order, each by header name or by 0-based
	// index (names and indices may be mixed). Names need Header. Nil selects every
	// column except the target, in file order. The target may not be an input, and no
	// column may be listed twice.
	//
	// Without a header, the inputs are named x<j> and the target y, where j is the
	// 0-based index of the column in the file.
	Columns []string
	// NoTarget says the file has no target column, as with inputs to predict from: every
	// selected column is an input (with Columns nil, every column), Target must be empty,
	// and the table's Target is "" and its Y all zeros, one per row, so that N counts the
	// rows.
	NoTarget bool
	// MaxLineBytes bounds the length of a line, its ending included (0:
	// DefaultMaxLineBytes). A longer line is an error naming it, read no further than the
	// bound, so a file without line breaks cannot exhaust memory.
	MaxLineBytes int
	// MaxFields bounds the number of fields of a row (0: DefaultMaxFields).
	MaxFields int
}

// Default bounds of CSVOptions.
const (
	DefaultMaxLineBytes = 1 << 20
	DefaultMaxFields    = 1 << 14
)

// bounds returns the line and field bounds with their defaults filled in.
func (o CSVOptions) bounds() (maxLine, maxFields int) {
	maxLine, maxFields = o.MaxLineBytes, o.MaxFields
	if maxLine <= 0 {
		maxLine = DefaultMaxLineBytes
	}
	if maxFields <= 0 {
		maxFields = DefaultMaxFields
	}
	return maxLine, maxFields
}

// ReadCSV reads a whole CSV stream into a table. Name identifies the stream in errors and
// becomes the table's Source. See CSVOptions for the format.
//
// ReadCSV fails with a *ParseError, naming the line and field, when a line is longer than
// opts.MaxLineBytes or has more fields than opts.MaxFields; when a selected field is
// empty, not a number, NaN or infinite; when a row has a different number of fields from
// the header (or, without a header, from the first row); when the stream has no data rows;
// when the header has an empty or duplicate name; and when the options name a column that
// does not exist, select the target as an input, or select no input at all. Errors never
// quote the data: they name the line, the 1-based field and what is wrong with it, so a
// file that is not meant to be read (a password file, a token) cannot leak through them.
func ReadCSV(r io.Reader, name string, opts CSVOptions) (*Table, error) {
	lr := newLineReader(bufio.NewReaderSize(r, readBufSize), name, 0, 0, opts)
	s, fields, _, err := readSchema(lr, name, opts)
	if err != nil {
		return nil, err
	}
	t := s.newTable()
	if !opts.Header {
		if err := s.parseRow(t, lr.line, fields); err != nil {
			return nil, err
		}
	}
	if err := s.readRows(lr, t, -1, 0, fields); err != nil {
		return nil, err
	}
	if t.N() == 0 {
		return nil, &ParseError{File: name, Msg: fmt.Sprintf(
			"there are no data rows after the header on line %d: add data rows below the header", s.line)}
	}
	return t, nil
}

// LoadCSV reads the CSV file at path into a table whose Source is path, decompressing it
// first when the name ends in ".gz". Errors name the path; see ReadCSV for the checks.
func LoadCSV(path string, opts CSVOptions) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := maybeGunzip(f, path)
	if err != nil {
		return nil, err
	}
	return ReadCSV(r, path, opts)
}

// maybeGunzip wraps r in a gzip reader when path ends in ".gz".
func maybeGunzip(r io.Reader, path string) (io.Reader, error) {
	if !strings.HasSuffix(path, ".gz") {
		return r, nil
	}
	zr, err := gzip.NewReader(r)
	if err != nil {
		if err == io.EOF {
			return nil, &ParseError{File: path, Msg: "the file is empty: a .gz file must hold gzip-compressed CSV data", Err: err}
		}
		return nil, &ParseError{File: path, Err: err, Msg: fmt.Sprintf(
			"not a valid gzip file (%v): compress it with gzip or remove the .gz suffix from its name", err)}
	}
	return zr, nil
}

// readSchema reads the first non-blank line of lr and builds the schema from it: the header,
// or the first data row, which fixes the width. It returns that line's fields (valid until the
// next read) and the offset where the line starts, for readers that own it as a data row.
func readSchema(lr *lineReader, name string, opts CSVOptions) (*schema, [][]byte, int64, error) {
	first, start, err := lr.next()
	if err == io.EOF {
		return nil, nil, 0, emptyFileError(name, opts.Header)
	}
	if err != nil {
		return nil, nil, 0, err
	}
	fields, err := lr.fields(first, nil)
	if err != nil {
		return nil, nil, 0, err
	}
	s, err := newSchema(name, opts, lr.line, fields)
	if err != nil {
		return nil, nil, 0, err
	}
	return s, fields, start, nil
}

func emptyFileError(name string, header bool) error {
	if header {
		return &ParseError{File: name, Msg: "the file is empty: expected a header line followed by data rows; check the path or add data"}
	}
	return &ParseError{File: name, Msg: "the file is empty: expected rows of comma-separated numbers; check the path or add data"}
}

const readBufSize = 64 << 10

// lineReader returns the non-blank lines of a stream with their line numbers and byte
// offsets. Lines are returned without their "\n" or "\r\n" ending.
type lineReader struct {
	br        *bufio.Reader
	name      string
	pos       int64 // byte offset of the next unread byte
	line      int   // line number of the last line read (lines before pos)
	long      []byte
	maxLine   int // longest line accepted, its ending included
	maxFields int // most fields accepted in a row
}

// newLineReader reads lines from br, whose first byte is at offset pos after line lines,
// with the bounds of opts.
func newLineReader(br *bufio.Reader, name string, pos int64, line int, opts CSVOptions) *lineReader {
	lr := &lineReader{br: br, name: name, pos: pos, line: line}
	lr.maxLine, lr.maxFields = opts.bounds()
	return lr
}

// tooLong is the error for line number line, longer than maxLine bytes.
func tooLong(name string, line, maxLine int) error {
	return &ParseError{File: name, Line: line, Msg: fmt.Sprintf(
		"the line is longer than %d bytes (the line length bound): check that the file is CSV with \\n line endings, "+
			"or raise the bound (--max-line-bytes)", maxLine)}
}

// fields splits line at commas as splitFields does, failing when it has more than the
// field bound.
func (lr *lineReader) fields(line []byte, dst [][]byte) ([][]byte, error) {
	if n := bytes.Count(line, []byte{','}) + 1; n > lr.maxFields {
		return nil, &ParseError{File: lr.name, Line: lr.line, Msg: fmt.Sprintf(
			"the row has %d fields, more than the bound of %d: check the file, or raise the bound (--max-fields)", n, lr.maxFields)}
	}
	return splitFields(line, dst), nil
}

// next returns the next non-blank line and the offset of its first byte, or io.EOF. The
// line is valid until the next call. Read failures are returned as *ParseError.
func (lr *lineReader) next() ([]byte, int64, error) {
	for {
		start := lr.pos
		raw, err := lr.raw()
		if errors.Is(err, errLineTooLong) {
			return nil, 0, tooLong(lr.name, lr.line+1, lr.maxLine)
		}
		if err != nil && err != io.EOF {
			return nil, 0, &ParseError{File: lr.name, Line: lr.line + 1, Err: err, Msg: fmt.Sprintf(
				"reading failed (%v): check that the file is complete and readable", err)}
		}
		if len(raw) == 0 {
			return nil, 0, io.EOF
		}
		lr.pos += int64(len(raw))
		lr.line++
		line := raw
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if start == 0 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if isBlank(line) {
			continue
		}
		return line, start, nil
	}
}

// errLineTooLong is returned by raw for a line longer than the bound.
var errLineTooLong = errors.New("line too long")

// raw returns the next line including its '\n', if any. At the end of the stream it
// returns the final unterminated line with a nil error, then (nil, io.EOF). A line longer
// than maxLine fails with errLineTooLong once maxLine bytes of it have been read.
func (lr *lineReader) raw() ([]byte, error) {
	b, err := lr.br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		if err == io.EOF && len(b) > 0 {
			err = nil
		}
		if len(b) > lr.maxLine {
			return nil, errLineTooLong
		}
		return b, err
	}
	lr.long = append(lr.long[:0], b...)
	for err == bufio.ErrBufferFull {
		if len(lr.long) > lr.maxLine {
			return nil, errLineTooLong
		}
		b, err = lr.br.ReadSlice('\n')
		lr.long = append(lr.long, b...)
	}
	if len(lr.long) > lr.maxLine {
		return nil, errLineTooLong
	}
	if err == io.EOF {
		err = nil
	}
	return lr.long, err
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' }

func isBlank(b []byte) bool {
	for _, c := range b {
		if !isSpace(c) {
			return false
		}
	}
	return true
}

// trimField removes surrounding whitespace and one pair of surrounding double quotes.
func trimField(f []byte) []byte {
	f = trimSpace(f)
	if len(f) >= 2 && f[0] == '"' && f[len(f)-1] == '"' {
		f = trimSpace(f[1 : len(f)-1])
	}
	return f
}

func trimSpace(f []byte) []byte {
	for len(f) > 0 && isSpace(f[0]) {
		f = f[1:]
	}
	for len(f) > 0 && isSpace(f[len(f)-1]) {
		f = f[:len(f)-1]
	}
	return f
}

// splitFields splits a line at commas into trimmed fields, reusing dst. The fields share
// storage with line.
func splitFields(line []byte, dst [][]byte) [][]byte {
	dst = dst[:0]
	for {
		i := bytes.IndexByte(line, ',')
		if i < 0 {
			return append(dst, trimField(line))
		}
		dst = append(dst, trimField(line[:i]))
		line = line[i+1:]
	}
}

// parseNumber parses a trimmed field. On failure it returns a message saying what is wrong
// with the field (without the advice on what to change). The message describes the field
// (its length, and its kind of bytes) but never quotes it.
func parseNumber(f []byte) (float64, string) {
	if len(f) == 0 {
		return 0, "the field is empty"
	}
	v, err := strconv.ParseFloat(string(f), 64)
	switch {
	case err != nil && errors.Is(err, strconv.ErrRange) && (math.IsInf(v, 0) || math.IsNaN(v)):
		return 0, "the field is too large for a 64-bit float"
	case err != nil && !errors.Is(err, strconv.ErrRange): // underflow to 0 or a subnormal is fine
		msg := fmt.Sprintf("the field (%d bytes, %s) is not a number", len(f), describeField(f))
		if bytes.IndexByte(f, '\r') >= 0 {
			msg += " (it holds a carriage return; convert the line endings to \\n)"
		}
		return 0, msg
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, "the field is not a finite number (NaN or infinite)"
	}
	return v, ""
}

const (
	roleSkip   = -1
	roleTarget = -2
)

// schema is what the header (or first row) and the options fix about a file: its width,
// and which columns are inputs and which is the target.
type schema struct {
	name       string
	header     bool
	line       int   // line of the header, or of the first data row without a header
	width      int   // fields per row
	role       []int // per column: input position, roleTarget or roleSkip
	inputs     []int // column of each input
	target     int
	columns    []string
	targetName string
}

// newSchema resolves opts against the header or first row, whose fields are given.
func newSchema(name string, opts CSVOptions, line int, fields [][]byte) (*schema, error) {
	s := &schema{name: name, header: opts.Header, line: line, width: len(fields)}
	fail := func(format string, args ...any) error {
		return &ParseError{File: name, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	var names []string
	index := map[string]int{}
	if opts.Header {
		names = make([]string, len(fields))
		for j, f := range fields {
			names[j] = string(f)
			if len(f) == 0 {
				return nil, &ParseError{File: name, Line: line, Column: j + 1,
					Msg: "the header has an empty column name: give every column a name"}
			}
			if k, dup := index[names[j]]; dup {
				return nil, &ParseError{File: name, Line: line, Column: j + 1, Msg: fmt.Sprintf(
					"duplicate column name in the header (fields %d and %d): rename one of them", k+1, j+1)}
			}
			index[names[j]] = j
		}
	}
	describe := func(j int) string { return "index " + strconv.Itoa(j) }
	resolve := func(what, sel string) (int, error) {
		key := strings.TrimSpace(sel)
		if j, ok := index[key]; ok {
			return j, nil
		}
		if j, err := strconv.Atoi(key); err == nil {
			if j < 0 || j >= s.width {
				return 0, fail("%s column index %d is out of range: the file has %d columns, numbered 0 to %d",
					what, j, s.width, s.width-1)
			}
			return j, nil
		}
		if !opts.Header {
			return 0, fail("%s column %q is given by name but the file is read without a header: "+
				"read it with a header or give a 0-based column index", what, sel)
		}
		return 0, fail("%s column %q is not in the header, which has %d fields: check the name's spelling and case, "+
			"or give a 0-based column index (0 to %d)", what, sel, s.width, s.width-1)
	}

	s.target = s.width - 1
	if opts.NoTarget {
		if opts.Target != "" {
			return nil, fail("target column %q is given but the file is read as having no target: "+
				"drop the target or read the file with one", opts.Target)
		}
		s.target = -1
	} else if opts.Target != "" {
		j, err := resolve("target", opts.Target)
		if err != nil {
			return nil, err
		}
		s.target = j
	}
	if opts.Columns == nil {
		for j := 0; j < s.width; j++ {
			if j != s.target {
				s.inputs = append(s.inputs, j)
			}
		}
	} else {
		seen := map[int]bool{}
		for _, sel := range opts.Columns {
			j, err := resolve("input", sel)
			if err != nil {
				return nil, err
			}
			if j == s.target {
				return nil, fail("column %s is the target and cannot also be an input: remove it from the input columns",
					describe(j))
			}
			if seen[j] {
				return nil, fail("input column %s is selected twice: list it once", describe(j))
			}
			seen[j] = true
			s.inputs = append(s.inputs, j)
		}
	}
	if len(s.inputs) == 0 {
		if opts.Columns == nil {
			return nil, fail("the rows have only %d field, the target, and no inputs: add input columns", s.width)
		}
		return nil, fail("no input columns are selected: select at least one")
	}

	s.role = make([]int, s.width)
	for j := range s.role {
		s.role[j] = roleSkip
	}
	if s.target >= 0 {
		s.role[s.target] = roleTarget
	}
	for k, j := range s.inputs {
		s.role[j] = k
	}
	s.columns = make([]string, len(s.inputs))
	for k, j := range s.inputs {
		if opts.Header {
			s.columns[k] = names[j]
		} else {
			s.columns[k] = "x" + strconv.Itoa(j)
		}
	}
	switch {
	case s.target < 0:
		s.targetName = ""
	case opts.Header:
		s.targetName = names[s.target]
	default:
		s.targetName = "y"
	}
	return s, nil
}

// newTable returns an empty table with the schema's column names.
func (s *schema) newTable() *Table {
	return &Table{Source: s.name, Columns: slices.Clone(s.columns), Target: s.targetName, D: len(s.inputs),
		X: []float64{}, Y: []float64{}}
}

// parseRow appends the row with the given fields, read from the given line, to t.
func (s *schema) parseRow(t *Table, line int, fields [][]byte) error {
	if len(fields) != s.width {
		var like string
		if s.header {
			like = fmt.Sprintf("the header on line %d", s.line)
		} else {
			like = fmt.Sprintf("the first row, on line %d", s.line)
		}
		return &ParseError{File: s.name, Line: line, Msg: fmt.Sprintf(
			"wrong number of fields: expected %d, like %s, got %d: fix or remove the row", s.width, like, len(fields))}
	}
	d := len(s.inputs)
	n := len(t.X)
	t.X = slices.Grow(t.X, d)[:n+d]
	row := t.X[n:]
	var y float64
	for j, f := range fields {
		r := s.role[j]
		if r == roleSkip {
			continue
		}
		v, bad := parseNumber(f)
		if bad != "" {
			t.X = t.X[:n]
			fix := "fix or remove the row"
			if !s.header && line == s.line {
				fix = fmt.Sprintf("if line %d is a header, read the file with a header; otherwise fix or remove the row", line)
			}
			return &ParseError{File: s.name, Line: line, Column: j + 1, Msg: bad + ": " + fix}
		}
		if r == roleTarget {
			y = v
		} else {
			row[r] = v
		}
	}
	t.Y = append(t.Y, y)
	return nil
}

// readRows parses the lines of lr into t. When end >= 0 it stops at the first line that
// starts at or after end; lines starting before skipBefore (the header) are skipped.
// Scratch is reused for the fields.
func (s *schema) readRows(lr *lineReader, t *Table, end, skipBefore int64, scratch [][]byte) error {
	for {
		line, start, err := lr.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if end >= 0 && start >= end {
			return nil
		}
		if start < skipBefore {
			continue
		}
		if scratch, err = lr.fields(line, scratch); err != nil {
			return err
		}
		if err := s.parseRow(t, lr.line, scratch); err != nil {
			return err
		}
	}
}
