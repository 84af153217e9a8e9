package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpreduce/gpreduce/internal/shard"
)

// dataAccessFlags are the data roots of every coordinator and worker the tests start: the
// temporary directory (the tests' generated data) and ../shared/data, if present.
func dataAccessFlags() []string {
	flags := []string{"--data-root", os.TempDir()}
	if dir, err := shard.SharedDataDir(); err == nil {
		flags = append(flags, "--data-root", dir)
	}
	return flags
}

// TestCSVShardsMatchEval: a plain CSV job cut into 2, 4 and 8 line-aligned byte ranges
// trains on the cluster the model `coordinator eval --train` trains on the same file with
// --shards set alike, bit for bit.
func TestCSVShardsMatchEval(t *testing.T) {
	plain := filepath.Join(t.TempDir(), "train2d.csv")
	if err := os.WriteFile(plain, []byte(rows2d(3000, 11)), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := []string{"--method", "gl", "--lengthscale-bounds", "0.3,2", "--nodes-per-dim", "16,16", "--max-iter", "30"}
	cols := []string{"--header", "--target", "y", "--columns", "a,b"}
	c := newCluster(t, 1)
	c.startWorkers(2)
	for _, k := range []int{2, 4, 8} {
		shards := []string{"--shards", strconv.Itoa(k)}
		id := c.submit(concat(spec, []string{"--data", plain, "--format", "csv"}, cols, shards)...)
		if s := c.waitJob(id, 3*time.Minute); s.State != "succeeded" {
			t.Fatalf("%d shards: job %s: %s", k, s.State, s.Error)
		}
		local := localModel(t, concat(spec, []string{"--train", plain, "--test", data.test2d}, cols, shards)...)
		sameModel(t, fmt.Sprintf("gl on a plain CSV in %d byte ranges", k), c.model(id), local)
	}
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestDataConfinement: a job naming a file outside the data roots, a symbolic link inside a
// root that points outside it, a URL matching no allowed prefix, and an allowed URL of a
// loopback service (without --allow-private-urls) all fail without a byte of the source in
// their errors or logs.
func TestDataConfinement(t *testing.T) {
	const secret = "secret-header-7f3a"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, secret+",b\n1,2\n")
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	c := newClusterWith(t, 1, func(c *cluster) {
		allow := []string{"--allow-url", srv.URL + "/allowed/"}
		c.serveFlags, c.workerFlags = allow, allow
	})
	c.startWorkers(1)
	link := filepath.Join(t.TempDir(), "passwd.csv")
	if err := os.Symlink("/etc/passwd", link); err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		name, uri string
		want      string
	}{
		{"file outside the roots", "/etc/passwd", "outside the data roots"},
		{"link out of a root", link, "outside the data roots"},
		{"file URL outside the roots", "file:///etc/passwd", "outside the data roots"},
		{"URL not allowed", "http://" + host + "/other/x.csv", "matches no allowed prefix"},
		{"loopback URL allowed by prefix", srv.URL + "/allowed/x.csv", "loopback, link-local or private address"},
	} {
		id := c.submit("--method", "gl", "--nodes-per-dim", "3", "--data", k.uri, "--header", "--target", "nosuch", "--shards", "2")
		s := c.waitJob(id, time.Minute)
		if s.State != "failed" || !strings.Contains(s.Error, k.want) {
			t.Errorf("%s: job %s: %q, want failed mentioning %q", k.name, s.State, s.Error, k.want)
		}
		for _, leak := range []string{"root:", "/bin/", secret} {
			if strings.Contains(s.Error, leak) {
				t.Errorf("%s: the error echoes the source (%q): %s", k.name, leak, s.Error)
			}
		}
		t.Logf("%s: %s", k.name, s.Error)
	}
	for _, p := range c.all {
		if strings.Contains(p.log(), secret) || strings.Contains(p.log(), "root:x:") {
			t.Errorf("%s logged the source's contents", p.name)
		}
	}
}

// lazyBody serves size bytes of fill (no newline) without allocating them.
type lazyBody struct {
	size, pos int64
	fill      byte
}

func (b *lazyBody) Read(p []byte) (int, error) {
	if b.pos >= b.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), b.size-b.pos))
	for i := range p[:n] {
		p[i] = b.fill
	}
	b.pos += int64(n)
	return n, nil
}

func (b *lazyBody) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += b.pos
	case io.SeekEnd:
		off += b.size
	}
	if off < 0 {
		return 0, errors.New("negative position")
	}
	b.pos = off
	return off, nil
}

// prefixed is a header line followed by a lazy body.
type prefixed struct {
	head []byte
	body *lazyBody
	pos  int64
}

func (p *prefixed) Read(b []byte) (int, error) {
	if p.pos < int64(len(p.head)) {
		n := copy(b, p.head[p.pos:])
		p.pos += int64(n)
		return n, nil
	}
	n, err := p.body.Read(b)
	p.pos += int64(n)
	return n, err
}

func (p *prefixed) Seek(off int64, whence int) (int64, error) {
	size := int64(len(p.head)) + p.body.size
	switch whence {
	case io.SeekCurrent:
		off += p.pos
	case io.SeekEnd:
		off += size
	}
	if off < 0 {
		return 0, errors.New("negative position")
	}
	p.pos = off
	_, err := p.body.Seek(max(0, off-int64(len(p.head))), io.SeekStart)
	return off, err
}

// TestBadSourcesFailFast: on a 3-member cluster, sources that are too large or stall fail
// their jobs within a bounded time with a clear error, and no member starts an election:
// a 512 MiB body without a newline (the leader reads its first line), a header followed by
// 512 MiB without a newline (the workers read the rows), a server that never answers, and
// one that answers the size and then stalls the rows.
func TestBadSourcesFailFast(t *testing.T) {
	const big = 512 << 20
	const readTimeout = 5 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mux := http.NewServeMux()
	mux.HandleFunc("/nonewline.csv", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "nonewline.csv", time.Time{}, &lazyBody{size: big, fill: '7'})
	})
	mux.HandleFunc("/longrow.csv", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "longrow.csv", time.Time{}, &prefixed{head: []byte("a,y\n1,2\n"), body: &lazyBody{size: big, fill: '7'}})
	})
	mux.HandleFunc("/silent.csv", func(w http.ResponseWriter, r *http.Request) {
		<-ctx.Done()
	})
	rows := rows2d(2000, 3)
	mux.HandleFunc("/stalls.csv", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead || r.Header.Get("Range") == "bytes=0-65535" {
			// The size and the first line (the leader's plan) come at once.
			http.ServeContent(w, r, "stalls.csv", time.Time{}, strings.NewReader(rows))
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(rows)))
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, rows[:100])
		w.(http.Flusher).Flush()
		<-ctx.Done()
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer cancel() // before srv.Close, which waits for the handlers
	flags := []string{"--allow-url", srv.URL + "/", "--allow-private-urls", "--read-timeout", readTimeout.String()}
	c := newClusterWith(t, 3, func(c *cluster) { c.serveFlags, c.workerFlags = flags, flags })
	c.startWorkers(2)
	leader := c.coords[c.leader()].id
	candidates := func() int {
		n := 0
		for _, co := range c.coords {
			n += strings.Count(co.proc.log(), "entering candidate state")
		}
		return n
	}
	before := candidates()
	for _, k := range []struct {
		name, path string
		want       []string
		bound      time.Duration
	}{
		{"512 MiB without a newline", "/nonewline.csv", []string{"longer than 1048576 bytes", "--max-line-bytes"}, time.Minute},
		{"a header, then 512 MiB without a newline", "/longrow.csv", []string{"longer than 1048576 bytes"}, time.Minute},
		{"never answers", "/silent.csv", []string{"stalled"}, time.Minute},
		{"answers, then stalls the rows", "/stalls.csv", []string{"stalled"}, time.Minute},
	} {
		t0 := time.Now()
		id := c.submit("--method", "gl", "--nodes-per-dim", "8,8", "--data", srv.URL+k.path, "--header", "--shards", "4")
		s := c.waitJob(id, 3*time.Minute)
		took := time.Since(t0)
		if s.State != "failed" {
			t.Errorf("%s: job %s: %s, want failed", k.name, s.State, s.Error)
			continue
		}
		for _, w := range k.want {
			if !strings.Contains(s.Error, w) {
				t.Errorf("%s: %q does not mention %q", k.name, s.Error, w)
			}
		}
		if strings.Contains(s.Error, "7777") {
			t.Errorf("%s: the error echoes the source: %s", k.name, s.Error)
		}
		if took > k.bound {
			t.Errorf("%s: failed after %s, want within %s", k.name, took.Round(time.Millisecond), k.bound)
		}
		t.Logf("%s: failed after %s: %s", k.name, took.Round(time.Millisecond), s.Error)
	}
	if after := candidates(); after != before {
		t.Errorf("%d elections started while the bad sources were read", after-before)
	}
	if now := c.coords[c.leader()].id; now != leader {
		t.Errorf("the leader changed from %s to %s", leader, now)
	}
}
