package shard

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestLineAndFieldBounds: a line longer than MaxLineBytes, or a row with more fields than
// MaxFields, fails with an error naming the line, whether read whole, by any byte range of
// a local file, or by any byte range over http (which streams the lines before its range).
func TestLineAndFieldBounds(t *testing.T) {
	long := strings.Repeat("7", 5000)
	for _, tc := range []struct {
		name string
		in   string
		opts CSVOptions
		line int
		want string
	}{
		{"long data line", "a,b\n1,2\n1," + long + "\n3,4\n", CSVOptions{Header: true, MaxLineBytes: 1000}, 3, "longer than 1000 bytes"},
		{"long header", long + ",b\n1,2\n", CSVOptions{Header: true, MaxLineBytes: 1000}, 1, "longer than 1000 bytes"},
		{"long last line, no newline", "a,b\n1,2\n" + long, CSVOptions{Header: true, MaxLineBytes: 1000}, 3, "longer than 1000 bytes"},
		{"long blank line", "a,b\n1,2\n" + strings.Repeat(" ", 5000) + "\n3,4\n", CSVOptions{Header: true, MaxLineBytes: 1000}, 3, "longer than 1000 bytes"},
		{"too many fields", "a,b\n1,2\n" + strings.Repeat("1,", 40) + "1\n", CSVOptions{Header: true, MaxFields: 20}, 3, "41 fields, more than the bound of 20"},
		{"too many header fields", strings.Repeat("x,", 40) + "y\n", CSVOptions{Header: true, MaxFields: 20}, 1, "more than the bound of 20"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadCSV(strings.NewReader(tc.in), "b.csv", tc.opts)
			checkParseError(t, err, "b.csv", tc.line, 0, tc.want)
			if strings.Contains(err.Error(), "777") {
				t.Fatalf("the error quotes the line: %v", err)
			}
			path := writeFile(t, "b.csv", tc.in)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.ServeContent(w, r, "b.csv", time.Time{}, strings.NewReader(tc.in))
			}))
			defer srv.Close()
			r := Reader{Limits: Limits{MaxLineBytes: tc.opts.MaxLineBytes, MaxFields: tc.opts.MaxFields}}
			for _, uri := range []string{path, srv.URL + "/b.csv"} {
				src := Source{URI: uri, Header: true}
				refs := splitSize(uri, int64(len(tc.in)), 7)
				failed := false
				for _, ref := range refs {
					_, err := r.Load(context.Background(), src, ref)
					var pe *ParseError
					if err != nil && errors.As(err, &pe) && strings.Contains(pe.Msg, tc.want) {
						if pe.Line != tc.line {
							t.Errorf("%s range %v: line %d, want %d", uri, ref, pe.Line, tc.line)
						}
						failed = true
					} else if err != nil && !strings.Contains(err.Error(), "bound") {
						t.Errorf("%s range %v: %v", uri, ref, err)
					}
				}
				if !failed {
					t.Errorf("%s: no range failed on the bound", uri)
				}
			}
		})
	}
}

// TestLongLineReadsBounded: reading a huge line stops at about the bound: a 64 MiB line
// is refused after reading little more than MaxLineBytes of it.
func TestLongLineReadsBounded(t *testing.T) {
	src := &countingReader{r: bytes.NewReader(bytes.Repeat([]byte("7"), 64<<20))}
	_, err := ReadCSV(src, "huge.csv", CSVOptions{MaxLineBytes: 1 << 20})
	checkParseError(t, err, "huge.csv", 1, 0, "longer than 1048576 bytes")
	if src.n > 2<<20 {
		t.Errorf("read %d bytes to refuse a line over 1 MiB", src.n)
	}
}

type countingReader struct {
	r interface{ Read([]byte) (int, error) }
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestErrorsNeverQuoteData: whatever is wrong with a file, its errors carry none of its
// bytes (a password file or token read by mistake cannot leak through them).
func TestErrorsNeverQuoteData(t *testing.T) {
	const s = "Zq9secretXk"
	for _, tc := range []struct {
		in   string
		opts CSVOptions
	}{
		{s + ",b\n1,2\n", CSVOptions{Header: true, Target: "nosuch"}},
		{s + ",b\n1,2\n", CSVOptions{Header: true, Columns: []string{"zz"}}},
		{s + "," + s + "\n1,2\n", CSVOptions{Header: true}},
		{"a,b\n1," + s + "\n", CSVOptions{Header: true}},
		{s + ",2\n", CSVOptions{}},
		{"root:x:0:0:" + s + ":/root:/bin/bash\n", CSVOptions{Header: true, Target: "nosuch"}},
		{"root:x:0:0:" + s + ":/root:/bin/bash\n", CSVOptions{Target: "0"}},
		{"a,b\n1,2\n" + s + "\n", CSVOptions{Header: true}},
		{"a,b\n1,2,3" + s + "\n", CSVOptions{Header: true}},
		{"a," + s + "\n1,2\n", CSVOptions{Header: true, Columns: []string{"1", "1"}}},
		{"a," + s + "\n1,2\n", CSVOptions{Header: true, Columns: []string{"1"}}},
		{"1e999" + s + ",2\n", CSVOptions{}},
		{"\"" + s + "\",2\n", CSVOptions{}},
	} {
		_, err := ReadCSV(strings.NewReader(tc.in), "x.csv", tc.opts)
		if err == nil {
			t.Errorf("%q: no error", tc.in)
			continue
		}
		for _, leak := range []string{s, "root:", "/bin"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("%q: the error quotes the data: %v", tc.in, err)
			}
		}
	}
}
