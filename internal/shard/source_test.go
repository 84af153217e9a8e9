package shard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fileServer serves the files of a directory over HTTP in one of several styles, and
// counts the body bytes it sends.
type fileServer struct {
	dir   string
	style string // "range": http.ServeContent; "norange": 200 with the whole file; "nohead": ranges, but HEAD fails; "nolength": no Range, no Content-Length
	sent  atomic.Int64
	reqs  atomic.Int64
	mu    sync.Mutex
	log   []string
}

func (s *fileServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.reqs.Add(1)
	s.mu.Lock()
	s.log = append(s.log, r.Method+" "+r.Header.Get("Range"))
	s.mu.Unlock()
	b, err := os.ReadFile(filepath.Join(s.dir, filepath.FromSlash(r.URL.Path)))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	cw := &countingWriter{ResponseWriter: w, n: &s.sent}
	switch s.style {
	case "range":
		http.ServeContent(cw, r, "", time.Time{}, strings.NewReader(string(b)))
	case "nohead":
		if r.Method == http.MethodHead {
			http.Error(w, "no HEAD here", http.StatusMethodNotAllowed)
			return
		}
		http.ServeContent(cw, r, "", time.Time{}, strings.NewReader(string(b)))
	case "norange":
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		if r.Method == http.MethodHead {
			return
		}
		cw.Write(b)
	case "nolength":
		if r.Method == http.MethodHead {
			return
		}
		w.(http.Flusher).Flush() // forces chunked encoding: no Content-Length
		cw.Write(b)
	}
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n.Add(int64(n))
	return n, err
}

func newFileServer(t *testing.T, dir, style string) (*fileServer, string) {
	t.Helper()
	fs := &fileServer{dir: dir, style: style}
	srv := httptest.NewServer(fs)
	t.Cleanup(srv.Close)
	return fs, srv.URL
}

func TestPlanLoadHTTPMatchesReadCSV(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(17, 19))
	dir := t.TempDir()
	for _, style := range []string{"range", "norange", "nohead", "nolength"} {
		t.Run(style, func(t *testing.T) {
			_, base := newFileServer(t, dir, style)
			for trial := 0; trial < 12; trial++ {
				header, crlf, trailing := rng.IntN(2) == 0, rng.IntN(2) == 0, rng.IntN(2) == 0
				content := randomCSV(rng, 1+rng.IntN(40), 2+rng.IntN(4), header, crlf, trailing)
				name := fmt.Sprintf("%s%d.csv", style, trial)
				path := writeFileIn(t, dir, name, content)
				url := base + "/" + name
				src := Source{URI: url, Header: header}
				if rng.IntN(3) == 0 {
					src.Target = "0"
				}
				opts := src.csvOptions()
				want, err := ReadCSV(strings.NewReader(content), url, opts)
				if err != nil {
					t.Fatal(err)
				}
				ks := []int{1, 2, 3, 5, 13, 64}
				if trial%6 == 0 && style == "range" {
					ks = append(ks, len(content)) // every byte a range: every possible cut
				}
				for _, k := range ks {
					if style == "nolength" {
						// Such a file cannot be planned (its size is unknown), but its
						// ranges can still be read.
						if _, err := Plan(ctx, src, k); err == nil || !strings.Contains(err.Error(), "Content-Length") {
							t.Fatalf("nolength plan: got %v", err)
						}
					}
					local, err := SplitRanges(path, k)
					if err != nil {
						t.Fatal(err)
					}
					refs := local
					if style != "nolength" {
						refs, err = Plan(ctx, src, k)
						if err != nil {
							t.Fatal(err)
						}
						if len(refs) != len(local) {
							t.Fatalf("k %d: %d http ranges, %d local", k, len(refs), len(local))
						}
						for i := range refs {
							l := local[i]
							l.Source = url
							if refs[i] != l {
								t.Fatalf("k %d: http range %+v, local %+v", k, refs[i], l)
							}
						}
					}
					var tabs []*Table
					for _, r := range refs {
						got, err := Load(ctx, src, r)
						if err != nil {
							t.Fatalf("trial %d, k %d, %v: %v\n%q", trial, k, r, err, content)
						}
						ref, err := ReadRange(path, r, opts)
						if err != nil {
							t.Fatal(err)
						}
						ref.Source = url
						if diff := equalTables(got, ref); diff != "" {
							t.Fatalf("trial %d, k %d, %v: http vs ReadRange: %s\n%q", trial, k, r, diff, content)
						}
						tabs = append(tabs, got)
					}
					if diff := equalTables(concat(tabs), want); diff != "" {
						t.Fatalf("trial %d, k %d: %s\n%q", trial, k, diff, content)
					}
				}
			}
		})
	}
}

// TestLoadHTTPErrorLines checks that a bad row read over HTTP is reported by exactly one
// range, with the true line, as ReadCSV reports it.
func TestLoadHTTPErrorLines(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(23, 29))
	dir := t.TempDir()
	_, base := newFileServer(t, dir, "range")
	for trial := 0; trial < 20; trial++ {
		header := rng.IntN(2) == 0
		content := randomCSV(rng, 5+rng.IntN(30), 3, header, rng.IntN(2) == 0, true)
		lines := strings.SplitAfter(content, "\n")
		var cand []int
		for i, l := range lines {
			if strings.TrimSpace(l) != "" {
				cand = append(cand, i)
			}
		}
		if header {
			cand = cand[1:]
		}
		bad := cand[rng.IntN(len(cand))]
		lines[bad] = strings.Replace(lines[bad], ",", ",oops", 1)
		content = strings.Join(lines, "")
		name := fmt.Sprintf("e%d.csv", trial)
		writeFileIn(t, dir, name, content)
		url := base + "/" + name
		src := Source{URI: url, Header: header}
		_, want := ReadCSV(strings.NewReader(content), url, src.csvOptions())
		checkParseError(t, want, url, bad+1, colOf(want), "fix or remove the row")
		for _, k := range []int{1, 2, 3, 5, 9, 17, 50} {
			refs, err := Plan(ctx, src, k)
			if err != nil {
				t.Fatal(err)
			}
			var errs []error
			for _, r := range refs {
				if _, err := Load(ctx, src, r); err != nil {
					errs = append(errs, err)
				}
			}
			if len(errs) != 1 || !strings.HasSuffix(errs[0].Error(), want.Error()) {
				t.Fatalf("trial %d, k %d: range errors %v; want just %v", trial, k, errs, want)
			}
			var pe *ParseError
			if !errors.As(errs[0], &pe) || pe.Line != bad+1 {
				t.Fatalf("trial %d, k %d: %v is not a ParseError on line %d", trial, k, errs[0], bad+1)
			}
		}
	}
}

// TestLoadHTTPUsesRanges checks that reading the first shard of a large file fetches little
// more than that shard, and that the last shard streams the file once.
func TestLoadHTTPUsesRanges(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("a,b\n")
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "%d,%d.25\n", i, i)
	}
	size := int64(b.Len())
	writeFileIn(t, dir, "big.csv", b.String())
	_, base := newFileServer(t, dir, "range")
	refs, err := Plan(ctx, Source{URI: base + "/big.csv", Header: true}, 16)
	if err != nil {
		t.Fatal(err)
	}
	// A fresh server per load, so that no byte of another request is counted.
	load := func(r Ref) (*Table, int64) {
		fs, base := newFileServer(t, dir, "range")
		tab, err := Load(ctx, Source{URI: base + "/big.csv", Header: true}, r)
		if err != nil {
			t.Fatal(err)
		}
		// The handler counts a write just after the client may have read it: let it settle.
		n := fs.sent.Load()
		for i := 0; i < 50; i++ {
			time.Sleep(20 * time.Millisecond)
			m := fs.sent.Load()
			if m == n {
				break
			}
			n = m
		}
		return tab, n
	}
	if _, got := load(refs[0]); got > refs[0].Length+firstTailChunk {
		t.Errorf("shard 0 of %d bytes fetched %d bytes", refs[0].Length, got)
	}
	tab, got := load(refs[len(refs)-1])
	if got != size {
		t.Errorf("last shard fetched %d bytes of a %d-byte file", got, size)
	}
	if tab.N() == 0 {
		t.Error("last shard is empty")
	}
}

func TestPlanLoadLocal(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	content := "a,b,y\n1,2,3\n4,5,6\n7,8,9\n10,11,12\n13,14,15\n"
	path := writeFileIn(t, dir, "d.csv", content)
	gz := writeFileIn(t, dir, "d.csv.gz", content)
	_, base := newFileServer(t, dir, "range")
	for _, tc := range []struct {
		name, uri, source string
		rows              bool
	}{
		{"path", path, path, false},
		{"file URL", "file://" + filepath.ToSlash(path), path, false},
		{"gzip path", gz, gz, true},
		{"gzip http", base + "/d.csv.gz", base + "/d.csv.gz", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := Source{URI: tc.uri, Format: "csv", Header: true, Target: "y"}
			want, err := ReadCSV(strings.NewReader(content), tc.source, src.csvOptions())
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []int{0, 1, 2, 3, 5, 100} {
				refs, err := Plan(ctx, src, k)
				if err != nil {
					t.Fatal(err)
				}
				if tc.rows {
					wantRefs, _ := PartitionCount(want, max(k, 1))
					if fmt.Sprint(refs) != fmt.Sprint(wantRefs) {
						t.Fatalf("k %d: refs %v, want %v", k, refs, wantRefs)
					}
				} else if k == 0 && len(refs) != 1 {
					t.Fatalf("automatic k: %d ranges of a small file", len(refs))
				}
				var tabs []*Table
				for _, r := range refs {
					tab, err := Load(ctx, src, r)
					if err != nil {
						t.Fatal(err)
					}
					tabs = append(tabs, tab)
				}
				if diff := equalTables(concat(tabs), want); diff != "" {
					t.Fatalf("k %d: %s", k, diff)
				}
			}
		})
	}
}

func TestPlanUCIMatchesPartitionCount(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(sharedData(t), "uci")
	for _, tc := range []struct {
		name  string
		split int
		ks    []int
	}{
		{"yacht", 0, []int{0, 1, 3, 7, 16}},
		{"concrete", 4, []int{0, 2, 5, 11}},
		{"challenger", 9, []int{1, 4, 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(root, tc.name)
			train, _, err := LoadUCI(dir, tc.split)
			if err != nil {
				t.Fatal(err)
			}
			for _, uri := range []string{dir, "file://" + filepath.ToSlash(dir)} {
				src := Source{URI: uri, Format: "uci", Split: tc.split}
				for _, k := range tc.ks {
					refs, err := Plan(ctx, src, k)
					if err != nil {
						t.Fatal(err)
					}
					wantK := k
					if k <= 0 {
						wantK = DefaultShards(train.N())
					}
					wantRefs, wantTabs := PartitionCount(train, wantK)
					if len(refs) != len(wantRefs) {
						t.Fatalf("k %d: %d shards, want %d", k, len(refs), len(wantRefs))
					}
					for i, r := range refs {
						if r != wantRefs[i] {
							t.Fatalf("k %d: shard %d is %+v, want %+v", k, i, r, wantRefs[i])
						}
						tab, err := Load(ctx, src, r)
						if err != nil {
							t.Fatal(err)
						}
						if diff := equalTables(tab, wantTabs[i]); diff != "" {
							t.Fatalf("k %d, shard %d: %s", k, i, diff)
						}
					}
				}
			}
		})
	}
}

func TestSplitSizeMatchesSplitRanges(t *testing.T) {
	for _, size := range []int{1, 2, 3, 10, 99, 1000, 12345} {
		path := writeFile(t, "f.csv", strings.Repeat("x", size))
		for _, k := range []int{1, 2, 3, 7, 10, 64, 1000, 20000} {
			want, err := SplitRanges(path, k)
			if err != nil {
				t.Fatal(err)
			}
			if got := splitSize(path, int64(size), k); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("size %d, k %d: %v, want %v", size, k, got, want)
			}
		}
	}
}

// TestDefaultShardCounts: the default shard count follows the documented rule, by rows and by
// CSV bytes: one shard per 256 rows (32 KiB) up to 16 shards, 16 up to 2^20 rows (128 MiB),
// one per 2^16 rows (8 MiB) above.
func TestDefaultShardCounts(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{0, 1}, {1, 1}, {256, 1}, {257, 2}, {2000, 8}, {4096, 16}, {13500, 16}, {1 << 20, 16}, {1<<20 + 1, 17}, {10_000_000, 153},
	} {
		if got := DefaultShards(tc.n); got != tc.want {
			t.Errorf("DefaultShards(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	for _, tc := range []struct {
		size int64
		want int
	}{{1, 1}, {32 << 10, 1}, {32<<10 + 1, 2}, {1 << 20, 16}, {8 << 20, 16}, {128 << 20, 16}, {128<<20 + 1, 17}, {1 << 30, 128}} {
		if got := DefaultByteShards(tc.size); got != tc.want {
			t.Errorf("DefaultByteShards(%d) = %d, want %d", tc.size, got, tc.want)
		}
	}
}

func TestSourceErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	content := "a,b\n1,2\n3,4\n5,6\n7,8\n"
	path := writeFileIn(t, dir, "d.csv", content)
	writeFileIn(t, dir, "empty.csv", "")
	_, base := newFileServer(t, dir, "range")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		src  Source
		want []string
	}{
		{"empty URI", ctx, Source{}, []string{"URI is empty"}},
		{"unknown format", ctx, Source{URI: path, Format: "parquet"}, []string{path, `unknown format "parquet"`}},
		{"bad scheme", ctx, Source{URI: "s3://bucket/x.csv"}, []string{"s3://bucket/x.csv", "unsupported scheme"}},
		{"remote file URL", ctx, Source{URI: "file://host/x.csv"}, []string{"local file"}},
		{"uci over http", ctx, Source{URI: base + "/uci", Format: "uci"}, []string{base + "/uci", "local directory"}},
		{"uci with columns", ctx, Source{URI: dir, Format: "uci", Target: "y"}, []string{"fixes its columns"}},
		{"missing file", ctx, Source{URI: filepath.Join(dir, "nope.csv")}, []string{filepath.Join(dir, "nope.csv"), "no such file"}},
		{"missing URL", ctx, Source{URI: base + "/nope.csv"}, []string{base + "/nope.csv", "404"}},
		{"empty URL", ctx, Source{URI: base + "/empty.csv"}, []string{base + "/empty.csv", "empty"}},
		{"bad column", ctx, Source{URI: path, Header: true, Target: "zz"}, []string{path + ":1:", `"zz" is not in the header`}},
		{"bad column http", ctx, Source{URI: base + "/d.csv", Header: true, Columns: []string{"q"}}, []string{base + "/d.csv:1:", `"q" is not in the header`}},
		{"missing UCI", ctx, Source{URI: filepath.Join(dir, "ds"), Format: "uci"}, []string{filepath.Join(dir, "ds", "data.csv.gz")}},
		{"canceled", canceled, Source{URI: path}, []string{"canceled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Plan(tc.ctx, tc.src, 2)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("plan error %q lacks %q", err, w)
				}
			}
			_, err = Load(tc.ctx, tc.src, Ref{Offset: 0, Length: 3})
			if err == nil {
				t.Fatal("load: no error")
			}
		})
	}
}

// TestLoadChangedSource plans a source, then changes or removes it: Load names the source
// and says to plan again.
func TestLoadChangedSource(t *testing.T) {
	ctx := context.Background()
	content := "a,b\n1,2\n3,4\n5,6\n7,8\n9,10\n"
	for _, style := range []string{"local", "range", "norange", "nolength"} {
		for _, gz := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s gz=%v", style, gz), func(t *testing.T) {
				dir := t.TempDir()
				name := "d.csv"
				if gz {
					name += ".gz"
				}
				path := writeFileIn(t, dir, name, content)
				uri := path
				if style != "local" {
					_, base := newFileServer(t, dir, style)
					uri = base + "/" + name
				}
				src := Source{URI: uri, Header: true}
				var refs []Ref
				if style == "nolength" && !gz {
					refs = splitSize(uri, int64(len(content)), 3)
				} else {
					var err error
					if refs, err = Plan(ctx, src, 3); err != nil {
						t.Fatal(err)
					}
				}
				last := refs[len(refs)-1]
				// Shrunk: the last shard is past the end.
				writeFileIn(t, dir, name, "a,b\n1,2\n")
				_, err := Load(ctx, src, last)
				if err == nil || !strings.Contains(err.Error(), uri) || !strings.Contains(err.Error(), "past the end") ||
					!strings.Contains(err.Error(), "again") {
					t.Errorf("shrunk source: got %v", err)
				}
				// Gone.
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				_, err = Load(ctx, src, refs[0])
				if err == nil || !strings.Contains(err.Error(), uri) {
					t.Errorf("removed source: got %v", err)
				}
			})
		}
	}
}

func TestParseContentRange(t *testing.T) {
	for _, tc := range []struct {
		h                  string
		first, last, total int64
		bad                bool
	}{
		{"bytes 0-0/10", 0, 0, 10, false},
		{"bytes 5-9/*", 5, 9, -1, false},
		{"bytes */42", -1, -1, 42, false},
		{"bytes 9-5/10", 0, 0, 0, true},
		{"items 0-1/2", 0, 0, 0, true},
		{"bytes 0-1", 0, 0, 0, true},
		{"", 0, 0, 0, true},
	} {
		first, last, total, err := parseContentRange(tc.h)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: no error", tc.h)
			}
			continue
		}
		if err != nil || first != tc.first || last != tc.last || total != tc.total {
			t.Errorf("%q: %d %d %d %v", tc.h, first, last, total, err)
		}
	}
}
