package shard

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Source says where a job's rows come from and how to read them: a CSV file (local path,
// file:// URL, or http(s):// URL read with Range requests) or the training rows of a UCI split
// (Format "uci": URI is the dataset directory holding data.csv.gz and test_mask.csv.gz).
type Source struct {
	URI     string
	Format  string // "csv" or "uci"
	Split   int    // uci: split 0-9
	Header  bool
	Target  string
	Columns []string
	// TrainRows > 0 keeps a fixed random sample of that many rows (SampleRows); the source
	// is then read whole and cut into row ranges, like a gzipped CSV.
	TrainRows int
}

// Reader reads data sources within an access policy and with bounds on what one source
// may cost. The zero Reader is unconfined and uses the default bounds.
type Reader struct {
	// Access says which files and URLs may be read.
	Access Access
	// Limits bound line lengths, field counts and the waits of http(s) reads.
	Limits Limits
}

// Layout is a planned source: its fixed shards and the names of the columns its tables
// carry (those of every shard's table).
type Layout struct {
	Refs    []Ref
	Columns []string
	Target  string
}

// Plan cuts src into its fixed shards with the zero Reader; see Reader.Plan.
func Plan(ctx context.Context, src Source, k int) ([]Ref, error) {
	l, err := Reader{}.Plan(ctx, src, k)
	return l.Refs, err
}

// Plan cuts src into its fixed shards: a plain CSV file into k line-aligned byte ranges, a
// gzipped CSV or a UCI split into k row ranges of nearly equal size (PartitionCount of the
// table). k <= 0 means one shard per 65536 rows (row ranges) or per 8 MiB (byte ranges).
// The plan depends only on the source's bytes and k.
//
// Byte ranges are those of SplitRanges, with Source the path (local files, including
// file:// URLs) or the URL (http and https, whose size Plan learns from a HEAD request or a
// one-byte Range request). Plan reads only the first line of a plain CSV file (at most
// MaxLineBytes), so that a column selection that does not fit the header fails here
// rather than on every shard, and to name the columns. Row ranges are exactly those of
// PartitionCount on the table LoadCSV or LoadUCI returns, so a job planned here cuts the
// same shards as one cut in memory; for them Plan reads the whole source. A UCI source
// must be a local directory, and takes no Header, Target or Columns: its layout fixes
// them. A source outside r.Access fails before anything is read.
func (r Reader) Plan(ctx context.Context, src Source, k int) (Layout, error) {
	l, _, err := r.plan(ctx, src, k)
	return l, err
}

// LoadAll plans src as Plan does and loads every shard, in shard order: the tables a
// cluster's workers would load for the same source and k.
func (r Reader) LoadAll(ctx context.Context, src Source, k int) (Layout, []*Table, error) {
	l, tabs, err := r.plan(ctx, src, k)
	if err != nil || tabs != nil {
		return l, tabs, err
	}
	tabs = make([]*Table, len(l.Refs))
	for i, ref := range l.Refs {
		if tabs[i], err = r.Load(ctx, src, ref); err != nil {
			return Layout{}, nil, err
		}
	}
	return l, tabs, nil
}

// plan is Plan; for row-range sources it also returns the shards' tables, which it reads
// anyway.
func (r Reader) plan(ctx context.Context, src Source, k int) (Layout, []*Table, error) {
	if err := ctx.Err(); err != nil {
		return Layout{}, nil, err
	}
	loc, err := r.locate(src)
	if err != nil {
		return Layout{}, nil, err
	}
	if loc.rows() {
		t, err := r.loadTable(ctx, src, loc)
		if err != nil {
			return Layout{}, nil, err
		}
		if k <= 0 {
			k = DefaultShards(t.N())
		}
		refs, tabs := PartitionCount(t, k)
		return Layout{Refs: refs, Columns: t.Columns, Target: t.Target}, tabs, nil
	}
	opts := r.csvOptions(src)
	var (
		refs []Ref
		s    *schema
	)
	if loc.url == "" {
		fi, err := os.Stat(loc.path)
		if err != nil {
			return Layout{}, nil, fmt.Errorf("plan: %w", err)
		}
		if k <= 0 {
			k = DefaultByteShards(fi.Size())
		}
		if refs, err = SplitRanges(loc.path, k); err != nil {
			return Layout{}, nil, err
		}
		f, err := os.Open(loc.path)
		if err != nil {
			return Layout{}, nil, fmt.Errorf("plan: %w", err)
		}
		defer f.Close()
		if s, err = readFirst(&ctxReader{ctx: ctx, r: f}, loc.name, opts); err != nil {
			return Layout{}, nil, err
		}
	} else {
		hc := r.newHTTPClient()
		defer hc.close()
		size, err := hc.size(ctx, loc.url)
		if err != nil {
			return Layout{}, nil, err
		}
		if size == 0 {
			return Layout{}, nil, &ParseError{File: loc.name, Msg: "the file is empty: expected CSV data; check the URL or add data"}
		}
		if k <= 0 {
			k = DefaultByteShards(size)
		}
		refs = splitSize(loc.name, size, k)
		if s, err = readFirst(hc.stream(ctx, loc.url, 0, firstTailChunk), loc.name, opts); err != nil {
			return Layout{}, nil, err
		}
	}
	t := s.newTable()
	return Layout{Refs: refs, Columns: t.Columns, Target: t.Target}, nil, nil
}

// Load reads the rows of one shard of src.
//
// A shard of a plain CSV file is a byte range, read as ReadRange reads it (Length 0: to the
// end of the file); over http(s) Load streams the bytes before the range to count its
// lines (so errors carry true line numbers) and reads the range, and the end of its last
// line, with Range requests, also working with servers that ignore Range. A shard of a
// gzipped CSV or a UCI split is the row range [First, First+Rows) of the whole table
// (Rows < 0: to the end), so each such Load reads and parses the whole source.
//
// Errors start "load shard <index>: " and name the source, and the line and column of bad
// data (*ParseError). A source that is gone, or has changed so that the shard lies past
// its end, is an error naming it that says to plan the job (split the file) again.
func Load(ctx context.Context, src Source, ref Ref) (*Table, error) {
	return Reader{}.Load(ctx, src, ref)
}

// Load reads the rows of one shard of src, as the package's Load does, within r's access
// policy and bounds: a source outside r.Access fails before anything is read.
func (r Reader) Load(ctx context.Context, src Source, ref Ref) (*Table, error) {
	t, err := r.load(ctx, src, ref)
	if err != nil {
		return nil, fmt.Errorf("load shard %d: %w", ref.Index, err)
	}
	return t, nil
}

func (r Reader) load(ctx context.Context, src Source, ref Ref) (*Table, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	loc, err := r.locate(src)
	if err != nil {
		return nil, err
	}
	if loc.rows() {
		if ref.Length != 0 {
			return nil, fmt.Errorf("load %s: %v is a byte range, but a %s source is cut into row ranges", loc.name, ref, loc.kind())
		}
		t, err := r.loadTable(ctx, src, loc)
		if err != nil {
			return nil, err
		}
		lo, hi := ref.First, ref.First+ref.Rows
		if ref.Rows < 0 {
			hi = t.N()
		}
		if lo < 0 || hi < lo || hi > t.N() {
			return nil, &ParseError{File: t.Source, Msg: fmt.Sprintf(
				"rows %d-%d of shard %d are past the end of the data (%d rows): the source changed since the job was planned; plan it again",
				lo, hi, ref.Index, t.N())}
		}
		return t.Slice(lo, hi), nil
	}
	if ref.Offset < 0 || ref.Length < 0 {
		return nil, fmt.Errorf("load %s: invalid byte range: offset %d, length %d", loc.name, ref.Offset, ref.Length)
	}
	if loc.url == "" {
		t, err := ReadRange(loc.path, ref, r.csvOptions(src))
		if err != nil {
			return nil, err
		}
		return t, ctx.Err()
	}
	hc := r.newHTTPClient()
	defer hc.close()
	return readRangeHTTP(ctx, hc, loc, ref, r.csvOptions(src))
}

// location is a resolved source: a local path or a URL, and its format.
type location struct {
	name string // how errors name the source: the path or the URL
	path string // local path, or ""
	url  string // http(s) URL, or ""
	uci  bool
	gz   bool
	// sampled: the source keeps a sample of its rows (Source.TrainRows).
	sampled bool
}

// rows reports whether the source is cut into row ranges rather than byte ranges.
func (l location) rows() bool { return l.uci || l.gz || l.sampled }

func (l location) kind() string {
	switch {
	case l.uci:
		return "UCI"
	case l.gz:
		return "gzipped CSV"
	}
	return "plain CSV"
}

// locate resolves src's URI, checks its format and options, and checks it against r's
// access policy.
func (r Reader) locate(src Source) (location, error) {
	loc, err := locate(src)
	if err != nil {
		return location{}, err
	}
	if loc.url != "" {
		u, err := url.Parse(loc.url)
		if err != nil {
			return location{}, fmt.Errorf("data source %s: %w", loc.url, err)
		}
		return loc, r.Access.checkURL(u)
	}
	paths := []string{loc.path}
	if loc.uci {
		paths = append(paths, filepath.Join(loc.path, uciData), filepath.Join(loc.path, uciMask))
	}
	for _, p := range paths {
		if err := r.Access.checkPath(p); err != nil {
			return location{}, err
		}
	}
	return loc, nil
}

// locate resolves src's URI and checks its format and options.
func locate(src Source) (location, error) {
	uri := src.URI
	if strings.TrimSpace(uri) == "" {
		return location{}, fmt.Errorf("data source: the URI is empty: give a path, file:// URL or http(s):// URL")
	}
	var loc location
	switch strings.ToLower(src.Format) {
	case "", "csv":
	case "uci":
		loc.uci = true
	default:
		return location{}, fmt.Errorf("data source %s: unknown format %q: use \"csv\" or \"uci\"", uri, src.Format)
	}
	scheme := ""
	if i := strings.Index(uri, "://"); i > 0 {
		scheme = strings.ToLower(uri[:i])
	}
	switch scheme {
	case "":
		loc.name, loc.path = uri, uri
	case "file":
		u, err := url.Parse(uri)
		if err != nil {
			return location{}, fmt.Errorf("data source %s: %w", uri, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return location{}, fmt.Errorf("data source %s: a file:// URL must name a local file (file:///path), not host %q", uri, u.Host)
		}
		if u.Path == "" {
			return location{}, fmt.Errorf("data source %s: the file:// URL has no path: write file:///absolute/path", uri)
		}
		loc.name, loc.path = filepath.FromSlash(u.Path), filepath.FromSlash(u.Path)
	case "http", "https":
		u, err := url.Parse(uri)
		if err != nil {
			return location{}, fmt.Errorf("data source %s: %w", uri, err)
		}
		if u.Host == "" {
			return location{}, fmt.Errorf("data source %s: the URL has no host", uri)
		}
		loc.name, loc.url = uri, uri
		loc.gz = strings.HasSuffix(u.Path, ".gz")
	default:
		return location{}, fmt.Errorf("data source %s: unsupported scheme %q: use a local path, file://, http:// or https://", uri, scheme)
	}
	if loc.path != "" {
		loc.gz = strings.HasSuffix(loc.path, ".gz")
	}
	if loc.uci {
		if loc.url != "" {
			return location{}, fmt.Errorf("data source %s: a UCI source must be a local directory, not a URL: "+
				"copy the dataset directory to the workers, or convert its split to CSV", uri)
		}
		if src.Header || src.Target != "" || len(src.Columns) > 0 {
			return location{}, fmt.Errorf("data source %s: a UCI dataset fixes its columns (no header, inputs first, target last): "+
				"drop the header, target and column options", uri)
		}
		loc.gz = false
	}
	if src.TrainRows < 0 {
		return location{}, fmt.Errorf("data source %s: train rows %d: give a positive number of rows, or 0 for all", uri, src.TrainRows)
	}
	loc.sampled = src.TrainRows > 0
	return loc, nil
}

func (s Source) csvOptions() CSVOptions {
	return CSVOptions{Header: s.Header, Target: s.Target, Columns: s.Columns}
}

// csvOptions are src's CSV options with r's bounds.
func (r Reader) csvOptions(src Source) CSVOptions {
	o := src.csvOptions()
	o.MaxLineBytes, o.MaxFields = r.Limits.MaxLineBytes, r.Limits.MaxFields
	return o
}

// loadTable reads a whole row-range source: a UCI split's training rows or a gzipped CSV.
func (r Reader) loadTable(ctx context.Context, src Source, loc location) (*Table, error) {
	var (
		t   *Table
		err error
	)
	switch {
	case loc.uci:
		t, _, err = LoadUCI(loc.path, src.Split)
	case loc.url == "":
		t, err = LoadCSV(loc.path, r.csvOptions(src))
	default:
		hc := r.newHTTPClient()
		defer hc.close()
		t, err = readWholeHTTP(ctx, hc, loc, r.csvOptions(src))
	}
	if err != nil {
		return nil, err
	}
	if k := src.TrainRows; k > 0 && k < t.N() {
		t = SampleRows(t, k)
	}
	return t, ctx.Err()
}

// autoByteShards is the automatic number of byte ranges for a file of size bytes.

// splitSize cuts size bytes into k ranges exactly as SplitRanges cuts a file of that size.
func splitSize(name string, size int64, k int) []Ref {
	if int64(k) > size {
		k = int(size)
	}
	per, extra := size/int64(k), size%int64(k)
	refs := make([]Ref, k)
	var off int64
	for i := range refs {
		n := per
		if int64(i) < extra {
			n++
		}
		refs[i] = Ref{Index: i, Source: name, Offset: off, Length: n, Rows: -1}
		off += n
	}
	return refs
}

// readFirst reads the first non-blank line of a CSV stream and returns the schema it
// fixes with opts.
func readFirst(r io.Reader, name string, opts CSVOptions) (*schema, error) {
	if c, ok := r.(io.Closer); ok {
		defer c.Close()
	}
	lr := newLineReader(bufio.NewReaderSize(r, readBufSize), name, 0, 0, opts)
	s, _, _, err := readSchema(lr, name, opts)
	return s, err
}

// readRangeHTTP reads the byte range ref of the plain CSV file at loc.url, as ReadRange
// reads a local file. It streams the file from its start, once: the first line fixes the
// schema, the lines before the range are counted but not parsed or stored, and the range
// is read to the end of its last line. The first request asks for bytes [0, end), later
// ones for growing chunks past end, as needed to finish the last line.
func readRangeHTTP(ctx context.Context, hc *httpClient, loc location, ref Ref, opts CSVOptions) (*Table, error) {
	name := loc.name
	end := int64(-1)
	if ref.Length > 0 {
		end = ref.Offset + ref.Length
	}
	st := hc.stream(ctx, loc.url, 0, end)
	defer st.Close()
	if err := st.start(); err != nil {
		return nil, err
	}
	if size := st.size; size >= 0 {
		e := end
		if e < 0 {
			e = size
		}
		if e > size || (ref.Offset > 0 && ref.Offset >= size) {
			return nil, pastEOF(name, ref.Offset, e, size)
		}
	}

	lr := newLineReader(bufio.NewReaderSize(st, readBufSize), name, 0, 0, opts)
	s, fields, firstStart, err := readSchema(lr, name, opts)
	if err != nil {
		return nil, err
	}
	t := s.newTable()
	owns := func(start int64) bool { return start >= ref.Offset && (end < 0 || start < end) }
	if !opts.Header && owns(firstStart) {
		if err := s.parseRow(t, lr.line, fields); err != nil {
			return nil, err
		}
	}
	// Skip to the first line starting at or after Offset: count the newlines before
	// Offset-1, then discard through the first '\n' at or after it.
	if ref.Offset > lr.pos {
		n, err := countDiscard(lr.br, ref.Offset-1-lr.pos, lr.maxLine)
		lr.pos += n.bytes
		lr.line += n.lines
		if errors.Is(err, errLineTooLong) {
			return nil, tooLong(name, lr.line+1, lr.maxLine)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, pastEOF(name, ref.Offset, end, lr.pos)
		}
		if err != nil {
			return nil, readFailed(name, lr.line, err)
		}
		for run := n.run; ; {
			b, err := lr.br.ReadSlice('\n')
			lr.pos += int64(len(b))
			run += int64(len(b))
			if err == nil {
				lr.line++
				break
			}
			if run > int64(lr.maxLine) {
				return nil, tooLong(name, lr.line+1, lr.maxLine)
			}
			if err == io.EOF {
				return t, checkReached(name, ref, end, lr.pos, st)
			}
			if err != bufio.ErrBufferFull {
				return nil, readFailed(name, lr.line, err)
			}
		}
	}
	if end < 0 || lr.pos < end {
		if err := s.readRows(lr, t, end, 0, fields); err != nil {
			return nil, err
		}
	}
	return t, checkReached(name, ref, end, lr.pos, st)
}

// checkReached reports a range past the end of a stream whose size was not known up front.
func checkReached(name string, ref Ref, end, pos int64, st *httpStream) error {
	if st.size < 0 && ((end >= 0 && pos < end) || (ref.Offset > 0 && pos <= ref.Offset)) {
		return pastEOF(name, ref.Offset, end, pos)
	}
	return nil
}

func pastEOF(name string, offset, end, size int64) error {
	return &ParseError{File: name, Msg: fmt.Sprintf(
		"byte range %d-%d is past the end of the file (%d bytes): the file changed since it was split; plan the job again",
		offset, end, size)}
}

func readFailed(name string, line int, err error) error {
	return &ParseError{File: name, Line: line + 1, Err: err, Msg: fmt.Sprintf(
		"reading failed (%v): check that the file is complete and readable", err)}
}

type counted struct {
	bytes int64
	lines int
	run   int64 // bytes since the last newline
}

// countDiscard reads and drops n bytes of br, counting its newlines. It fails with
// errLineTooLong when a line in them is longer than maxLine.
func countDiscard(br *bufio.Reader, n int64, maxLine int) (counted, error) {
	var c counted
	for c.bytes < n {
		b, err := br.Peek(int(min(n-c.bytes, int64(br.Size()))))
		c.lines += bytes.Count(b, []byte{'\n'})
		c.bytes += int64(len(b))
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			c.run = int64(len(b) - 1 - i)
		} else {
			c.run += int64(len(b))
		}
		if c.run > int64(maxLine) {
			return c, errLineTooLong
		}
		if _, derr := br.Discard(len(b)); derr != nil {
			return c, derr
		}
		if err != nil && err != bufio.ErrBufferFull {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return c, err
		}
	}
	return c, nil
}

// readWholeHTTP reads a whole (gzipped) CSV file over http(s).
func readWholeHTTP(ctx context.Context, hc *httpClient, loc location, opts CSVOptions) (*Table, error) {
	st := hc.stream(ctx, loc.url, 0, -1)
	defer st.Close()
	if err := st.start(); err != nil {
		return nil, err
	}
	var r io.Reader = st
	if loc.gz {
		zr, err := gzip.NewReader(st)
		if err != nil {
			if err == io.EOF {
				return nil, &ParseError{File: loc.name, Msg: "the file is empty: a .gz file must hold gzip-compressed CSV data", Err: err}
			}
			return nil, &ParseError{File: loc.name, Err: err, Msg: fmt.Sprintf(
				"not a valid gzip file (%v): compress it with gzip or remove the .gz suffix from its name", err)}
		}
		r = zr
	}
	return ReadCSV(r, loc.name, opts)
}

func (hc *httpClient) do(ctx context.Context, method, u, rng string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	req.Header.Set("Accept-Encoding", "identity")
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := hc.c.Do(req)
	if err != nil {
		if errors.Is(err, ErrRefused) {
			return nil, err
		}
		return nil, hc.stalled(u, fmt.Errorf("%s %s: %w", method, u, err))
	}
	return resp, nil
}

// size returns the length of the resource at u, from a HEAD request or, failing that, a
// one-byte Range request.
func (hc *httpClient) size(ctx context.Context, u string) (int64, error) {
	resp, err := hc.do(ctx, http.MethodHead, u, "")
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK && resp.ContentLength >= 0 {
		return resp.ContentLength, nil
	}
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone {
		return 0, statusError(http.MethodHead, u, resp)
	}
	resp, err = hc.do(ctx, http.MethodGet, u, "bytes=0-0")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent, http.StatusRequestedRangeNotSatisfiable:
		_, _, total, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil || total < 0 {
			return 0, fmt.Errorf("GET %s: cannot tell the file's size from Content-Range %q", u, resp.Header.Get("Content-Range"))
		}
		return total, nil
	case http.StatusOK:
		if resp.ContentLength >= 0 {
			return resp.ContentLength, nil
		}
		return 0, fmt.Errorf("GET %s: the server sends neither Content-Length nor Content-Range, so the file cannot be split: "+
			"serve it with a length, or convert it to a gzipped CSV, which is read whole", u)
	}
	return 0, statusError(http.MethodGet, u, resp)
}

func statusError(method, u string, resp *http.Response) error {
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone {
		return fmt.Errorf("%s %s: %s: the file is not there; check the URL, or plan the job again if it moved", method, u, resp.Status)
	}
	return fmt.Errorf("%s %s: unexpected status %s", method, u, resp.Status)
}

// parseContentRange parses "bytes first-last/total" or "bytes */total"; first and last are
// -1 for the second form and total is -1 when given as "*".
func parseContentRange(h string) (first, last, total int64, err error) {
	bad := fmt.Errorf("malformed Content-Range %q", h)
	rest, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes ")
	if !ok {
		return 0, 0, 0, bad
	}
	rng, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, 0, bad
	}
	total = -1
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil || total < 0 {
			return 0, 0, 0, bad
		}
	}
	if rng == "*" {
		return -1, -1, total, nil
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, 0, bad
	}
	if first, err = strconv.ParseInt(a, 10, 64); err != nil || first < 0 {
		return 0, 0, 0, bad
	}
	if last, err = strconv.ParseInt(b, 10, 64); err != nil || last < first {
		return 0, 0, 0, bad
	}
	return first, last, total, nil
}

// httpStream reads a resource sequentially from an offset with Range requests: the first
// for [pos, firstEnd) (to the end when firstEnd < 0), then chunks of growing size. A server
// that ignores Range answers 200 with the whole resource; the stream then skips to pos and
// reads that one body to its end.
type httpStream struct {
	ctx      context.Context
	hc       *httpClient
	url      string
	pos      int64
	firstEnd int64
	chunk    int64
	size     int64 // -1 until known
	body     io.ReadCloser
	bodyEnd  int64 // exclusive end of the body's bytes; -1: to the end of the resource
	started  bool
	eof      bool
}

const (
	firstTailChunk = 64 << 10
	maxTailChunk   = 4 << 20
)

func (hc *httpClient) stream(ctx context.Context, u string, pos, firstEnd int64) *httpStream {
	return &httpStream{ctx: ctx, hc: hc, url: u, pos: pos, firstEnd: firstEnd, chunk: firstTailChunk, size: -1}
}

// start makes the first request, so that size is known (when the server says it).
func (s *httpStream) start() error {
	if s.started {
		return nil
	}
	s.started = true
	end := s.firstEnd
	if end >= 0 && end <= s.pos {
		end = s.pos + 1
	}
	return s.open(end)
}

// open requests bytes [s.pos, end) (to the end of the resource when end < 0).
func (s *httpStream) open(end int64) error {
	rng := fmt.Sprintf("bytes=%d-", s.pos)
	if end >= 0 {
		rng += strconv.FormatInt(end-1, 10)
	}
	resp, err := s.hc.do(s.ctx, http.MethodGet, s.url, rng)
	if err != nil {
		return err
	}
	switch resp.StatusCode {
	case http.StatusPartialContent:
		first, last, total, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil || first != s.pos {
			resp.Body.Close()
			return fmt.Errorf("GET %s: asked for %s, got Content-Range %q", s.url, rng, resp.Header.Get("Content-Range"))
		}
		if total >= 0 {
			s.size = total
		}
		s.body, s.bodyEnd = resp.Body, last+1
		return nil
	case http.StatusOK:
		if resp.ContentLength >= 0 {
			s.size = resp.ContentLength
		}
		if s.pos > 0 {
			n, err := io.CopyN(io.Discard, resp.Body, s.pos)
			if err != nil {
				resp.Body.Close()
				if err == io.EOF {
					s.size, s.eof = n, true
					return nil
				}
				return fmt.Errorf("GET %s: skipping to byte %d: %w", s.url, s.pos, err)
			}
		}
		s.body, s.bodyEnd = resp.Body, -1
		return nil
	case http.StatusRequestedRangeNotSatisfiable:
		resp.Body.Close()
		if _, _, total, err := parseContentRange(resp.Header.Get("Content-Range")); err == nil && total >= 0 {
			s.size = total
		} else if s.size < 0 {
			s.size = s.pos
		}
		s.eof = true
		return nil
	}
	resp.Body.Close()
	return statusError(http.MethodGet, s.url, resp)
}

// Read implements io.Reader.
func (s *httpStream) Read(p []byte) (int, error) {
	if err := s.start(); err != nil {
		return 0, err
	}
	for {
		if s.body == nil {
			if s.eof || (s.size >= 0 && s.pos >= s.size) {
				return 0, io.EOF
			}
			end := s.pos + s.chunk
			s.chunk = min(2*s.chunk, maxTailChunk)
			if err := s.open(end); err != nil {
				return 0, err
			}
			continue
		}
		n, err := s.body.Read(p)
		err = s.hc.stalled(s.url, err)
		s.pos += int64(n)
		if err == io.EOF {
			s.body.Close()
			s.body = nil
			switch {
			case s.bodyEnd < 0:
				s.eof = true
			case s.pos < s.bodyEnd:
				return n, fmt.Errorf("GET %s: the response ended at byte %d, before byte %d: %w", s.url, s.pos, s.bodyEnd, io.ErrUnexpectedEOF)
			}
			err = nil
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// Close releases the current response, if any.
func (s *httpStream) Close() error {
	if s.body != nil {
		err := s.body.Close()
		s.body = nil
		return err
	}
	return nil
}

// ctxReader stops reading when its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
