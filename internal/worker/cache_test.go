package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gpreduce/gpreduce/internal/shard"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// rowsTable returns a table of n rows of one input, 16n bytes by the cache's estimate.
func rowsTable(n int, v float64) *shard.Table {
	t := &shard.Table{Source: "mem", Columns: []string{"x"}, Target: "y", D: 1, X: make([]float64, n), Y: make([]float64, n)}
	for i := range t.X {
		t.X[i], t.Y[i] = v, -v
	}
	return t
}

func key(i int) shardKey {
	k, _ := keyOf(&pb.DataSource{Uri: "mem"}, &pb.ShardRef{Index: int32(i)})
	return k
}

func TestKeyIgnoresJob(t *testing.T) {
	src := &pb.DataSource{Uri: "/d.csv", Header: true, Columns: []string{"a", "b"}}
	ref := &pb.ShardRef{Index: 2, Offset: 100, Length: 50, Rows: -1}
	a, _ := keyOf(src, ref)
	b, _ := keyOf(&pb.DataSource{Uri: "/d.csv", Header: true, Columns: []string{"a", "b"}}, &pb.ShardRef{Index: 2, Offset: 100, Length: 50, Rows: -1})
	c, _ := keyOf(src, &pb.ShardRef{Index: 2, Offset: 100, Length: 51, Rows: -1})
	d, _ := keyOf(&pb.DataSource{Uri: "/d.csv", Header: true, Columns: []string{"b", "a"}}, ref)
	if a != b || a == c || a == d {
		t.Errorf("keys: equal sources %v %v, other range %v, other columns %v", a, b, c, d)
	}
}

func TestCacheLRU(t *testing.T) {
	for _, spill := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "spill"}[spill], func(t *testing.T) {
			ctx := context.Background()
			dir := ""
			if spill {
				dir = t.TempDir()
			}
			var shards int
			var bytes int64
			c := newShardCache(3*160, 1<<20, dir, zerolog.Nop(), func(n int, b int64) { shards, bytes = n, b })
			loads := map[int]int{}
			get := func(i int, stamp string) string {
				t.Helper()
				tab, from, err := c.get(ctx, key(i), stamp, func(context.Context) (*shard.Table, error) {
					loads[i]++
					return rowsTable(10, float64(i)), nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if tab.N() != 10 || tab.X[3] != float64(i) || tab.Y[9] != -float64(i) {
					t.Fatalf("shard %d: got %+v", i, tab)
				}
				return from
			}
			for i := 0; i < 3; i++ {
				if from := get(i, ""); from != fromSource {
					t.Fatalf("first get of %d from %s", i, from)
				}
			}
			if from := get(0, ""); from != fromMemory { // 0 is now the most recent
				t.Fatalf("cached shard from %s", from)
			}
			get(3, "") // evicts 1, the least recently used
			if shards != 3 || bytes != 3*160 || c.len() != 3 {
				t.Fatalf("%d shards, %d bytes after eviction", shards, bytes)
			}
			wantFrom := fromSource
			if spill {
				wantFrom = fromDisk
				if files, _ := filepath.Glob(filepath.Join(dir, "*.shard")); len(files) != 1 {
					t.Fatalf("spill directory holds %v", files)
				}
			}
			if from := get(1, ""); from != wantFrom {
				t.Fatalf("evicted shard from %s, want %s", from, wantFrom)
			}
			if from := get(0, "v2"); from != fromSource {
				t.Fatalf("changed source served from %s", from)
			}
			if spill && loads[1] != 1 {
				t.Errorf("spilled shard loaded %d times", loads[1])
			}
			// Too large for the budget: returned, not kept.
			tab, _, err := c.get(ctx, key(9), "", func(context.Context) (*shard.Table, error) { return rowsTable(100, 1), nil })
			if err != nil || tab.N() != 100 || c.len() != 3 {
				t.Fatalf("oversized shard: %v, %d cached", err, c.len())
			}
		})
	}
}

func TestCacheSharesLoads(t *testing.T) {
	c := newShardCache(1<<20, 0, "", zerolog.Nop(), nil)
	var loads atomic.Int32
	release := make(chan struct{})
	load := func(context.Context) (*shard.Table, error) {
		loads.Add(1)
		<-release
		return rowsTable(5, 1), nil
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := c.get(context.Background(), key(1), "", load); err != nil {
				t.Error(err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := loads.Load(); n != 1 {
		t.Errorf("%d loads for 8 concurrent requests", n)
	}
}

// TestCacheLoaderLeaves checks that when the caller loading a shard leaves, a waiting
// caller loads it itself, and a load error reaches every waiter.
func TestCacheLoaderLeaves(t *testing.T) {
	c := newShardCache(1<<20, 0, "", zerolog.Nop(), nil)
	ctx1, cancel1 := context.WithCancel(context.Background())
	started := make(chan struct{})
	done1 := make(chan error, 1)
	go func() {
		_, _, err := c.get(ctx1, key(1), "", func(ctx context.Context) (*shard.Table, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		})
		done1 <- err
	}()
	<-started
	done2 := make(chan error, 1)
	go func() {
		_, from, err := c.get(context.Background(), key(1), "", func(context.Context) (*shard.Table, error) { return rowsTable(2, 2), nil })
		if err == nil && from != fromSource {
			err = errors.New("second caller did not load: " + from)
		}
		done2 <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel1()
	if err := <-done1; !errors.Is(err, context.Canceled) {
		t.Errorf("first caller: %v", err)
	}
	if err := <-done2; err != nil {
		t.Errorf("second caller: %v", err)
	}
	boom := errors.New("boom")
	if _, _, err := c.get(context.Background(), key(5), "", func(context.Context) (*shard.Table, error) { return nil, boom }); err != boom {
		t.Errorf("load error: %v", err)
	}
	if c.len() != 1 {
		t.Errorf("%d shards cached", c.len())
	}
}

func TestStampChangesWithFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "d.csv")
	if err := os.WriteFile(path, []byte("1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := stampOf(shard.Source{URI: path})
	if a != stampOf(shard.Source{URI: "file://" + filepath.ToSlash(path)}) {
		t.Error("path and file URL stamps differ")
	}
	if err := os.WriteFile(path, []byte("1,2\n3,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b := stampOf(shard.Source{URI: path}); a == b {
		t.Errorf("stamp %q unchanged after a rewrite", a)
	}
	if s := stampOf(shard.Source{URI: "http://example.com/d.csv"}); s != "" {
		t.Errorf("remote stamp %q", s)
	}
	if s := stampOf(shard.Source{URI: dir, Format: "uci"}); s != "missing;missing;" {
		t.Errorf("UCI stamp %q", s)
	}
}
