package shard

import (
	"strconv"
	"strings"
)

// ParseError reports bad input data: where it is and what to change. Every error this package
// returns about the contents of a file is a *ParseError or wraps one, so callers can find it
// with errors.As.
type ParseError struct {
	// File names the source, as given to the reader (a path or a stream name).
	File string
	// Line is the 1-based line number in File, or 0 when the problem is not on one line
	// (an empty file, a constant target).
	Line int
	// Column is the 1-based index of the field within the CSV row, or 0 when the problem
	// concerns the whole row or file.
	Column int
	// Msg says what is wrong and what to change, e.g.
	// `the field (3 bytes, with letters) is not a number: fix or remove the row`. It never
	// quotes the data.
	Msg string
	// Err is the underlying error, if any (a read or decompression failure); it is
	// returned by Unwrap and not printed separately (Msg already describes it).
	Err error
}

// Error formats the error as file:line:column: message, leaving out the line and column
// when they are 0, e.g. `data.csv:12:3: the field (3 bytes, with letters) is not a number: fix or remove the row`.
func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Column))
		}
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying error, or nil.
func (e *ParseError) Unwrap() error { return e.Err }

// describeField says what kind of bytes a field that failed to parse holds, without
// quoting it: error messages never echo data (see ReadCSV).
func describeField(f []byte) string {
	letters := false
	for _, c := range f {
		switch {
		case c >= 0x80 || (c < 0x20 && c != '\t' && c != '\r'):
			return "with non-text bytes"
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			letters = true
		}
	}
	if letters {
		return "with letters"
	}
	return "with symbols or digits"
}
