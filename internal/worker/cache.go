package worker

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/shard"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// shardKey identifies a shard independently of the job that asks for it: the SHA-256 of
// the deterministic encoding of its data source and shard reference.
type shardKey [32]byte

func (k shardKey) String() string { return hex.EncodeToString(k[:8]) }

// keyOf returns the cache key of a shard.
func keyOf(src *pb.DataSource, ref *pb.ShardRef) (shardKey, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&pb.LoadShardRequest{Source: src, Shard: ref})
	if err != nil {
		return shardKey{}, fmt.Errorf("shard key: %w", err)
	}
	return sha256.Sum256(b), nil
}

// tableBytes estimates the memory of a table: 8 bytes per value.
func tableBytes(t *shard.Table) int64 { return 8 * int64(len(t.X)+len(t.Y)) }

// stampOf describes the current version of a local source (the size and modification time
// of its files), so that a cached shard of a file changed in place is not served. Remote
// sources have no stamp ("") and are trusted not to change under the same shard.
func stampOf(src shard.Source) string {
	var files []string
	uri := src.URI
	switch {
	case strings.HasPrefix(strings.ToLower(uri), "http://"), strings.HasPrefix(strings.ToLower(uri), "https://"):
		return ""
	case strings.HasPrefix(strings.ToLower(uri), "file://"):
		u, err := url.Parse(uri)
		if err != nil {
			return ""
		}
		uri = filepath.FromSlash(u.Path)
	}
	if strings.EqualFold(src.Format, "uci") {
		files = []string{filepath.Join(uri, "data.csv.gz"), filepath.Join(uri, "test_mask.csv.gz")}
	} else {
		files = []string{uri}
	}
	var b strings.Builder
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			b.WriteString("missing;")
			continue
		}
		b.WriteString(strconv.FormatInt(fi.Size(), 10))
		b.WriteByte('@')
		b.WriteString(strconv.FormatInt(fi.ModTime().UnixNano(), 10))
		b.WriteByte(';')
	}
	return b.String()
}

// cacheEntry is a shard held in memory.
type cacheEntry struct {
	key   shardKey
	stamp string
	tab   *shard.Table
	bytes int64
}

// diskEntry is a shard spilled to disk.
type diskEntry struct {
	key   shardKey
	stamp string
	path  string
	bytes int64
}

// flight is a load in progress; waiters block on done.
type flight struct {
	done chan struct{}
	tab  *shard.Table
	err  error
}

// source of a lookup, for metrics.
const (
	fromMemory = "memory"
	fromDisk   = "disk"
	fromSource = "source"
)

// shardCache holds loaded shards in memory, least recently used first out, within a byte
// budget. With a spill directory, shards pushed out of memory are written there (within
// their own byte budget) and read back instead of loading them from their source again.
// Concurrent requests for the same missing shard share one load.
type shardCache struct {
	budget, diskBudget int64
	spillDir           string // "" disables the disk tier
	log                zerolog.Logger
	onChange           func(shards int, bytes int64) // called with mu held

	mu       sync.Mutex
	used     int64
	lru      *list.List // of *cacheEntry, most recent at the front
	items    map[shardKey]*list.Element
	diskUsed int64
	diskLRU  *list.List // of *diskEntry
	disk     map[shardKey]*list.Element
	flights  map[shardKey]*flight
}

func newShardCache(budget, diskBudget int64, spillDir string, log zerolog.Logger, onChange func(int, int64)) *shardCache {
	if onChange == nil {
		onChange = func(int, int64) {}
	}
	return &shardCache{budget: budget, diskBudget: diskBudget, spillDir: spillDir, log: log, onChange: onChange,
		lru: list.New(), items: map[shardKey]*list.Element{}, diskLRU: list.New(), disk: map[shardKey]*list.Element{},
		flights: map[shardKey]*flight{}}
}

// len returns the number of shards held in memory.
func (c *shardCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// get returns the shard key at version stamp, from memory, from disk, or by load (run in
// the caller's goroutine with its context), and says where it came from. If another
// caller is loading the same shard, get waits for it; if that load fails because its
// caller left, get loads the shard itself.
func (c *shardCache) get(ctx context.Context, key shardKey, stamp string, load func(context.Context) (*shard.Table, error)) (*shard.Table, string, error) {
	for {
		c.mu.Lock()
		if el, ok := c.items[key]; ok {
			e := el.Value.(*cacheEntry)
			if e.stamp == stamp {
				c.lru.MoveToFront(el)
				c.mu.Unlock()
				return e.tab, fromMemory, nil
			}
			c.removeLocked(el)
			c.log.Info().Str("shard", key.String()).Msg("source changed since the shard was cached: loading it again")
		}
		if f, ok := c.flights[key]; ok {
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, "", ctx.Err()
			}
			if f.err == nil {
				return f.tab, fromMemory, nil
			}
			if isContextErr(f.err) && ctx.Err() == nil {
				continue // the loader left; load it here
			}
			return nil, "", f.err
		}
		f := &flight{done: make(chan struct{})}
		c.flights[key] = f
		de := c.takeDiskLocked(key, stamp)
		c.mu.Unlock()

		from := fromSource
		var tab *shard.Table
		var err error
		if de != nil {
			if tab, err = readSpill(de.path); err == nil {
				from = fromDisk
			} else {
				c.log.Warn().Err(err).Str("shard", key.String()).Msg("cannot read spilled shard: loading it from its source")
			}
			os.Remove(de.path)
		}
		if tab == nil {
			tab, err = load(ctx)
		}
		f.tab, f.err = tab, err
		var spill []*cacheEntry
		c.mu.Lock()
		delete(c.flights, key)
		if err == nil {
			spill = c.addLocked(&cacheEntry{key: key, stamp: stamp, tab: tab, bytes: tableBytes(tab)})
		}
		c.onChange(c.lru.Len(), c.used)
		c.mu.Unlock()
		close(f.done)
		c.spill(spill)
		return tab, from, err
	}
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// addLocked inserts e and evicts the least recently used shards beyond the budget,
// returning them. A shard larger than the whole budget is not kept.
func (c *shardCache) addLocked(e *cacheEntry) []*cacheEntry {
	if e.bytes > c.budget {
		c.log.Warn().Str("shard", e.key.String()).Int64("bytes", e.bytes).Int64("budget", c.budget).
			Msg("shard is larger than the cache budget: not cached")
		return nil
	}
	if el, ok := c.items[e.key]; ok {
		c.removeLocked(el)
	}
	c.items[e.key] = c.lru.PushFront(e)
	c.used += e.bytes
	var out []*cacheEntry
	for c.used > c.budget {
		el := c.lru.Back()
		out = append(out, el.Value.(*cacheEntry))
		c.removeLocked(el)
	}
	return out
}

func (c *shardCache) removeLocked(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.lru.Remove(el)
	delete(c.items, e.key)
	c.used -= e.bytes
}

// takeDiskLocked removes and returns the spilled copy of key if it is at version stamp;
// a stale copy is deleted.
func (c *shardCache) takeDiskLocked(key shardKey, stamp string) *diskEntry {
	el, ok := c.disk[key]
	if !ok {
		return nil
	}
	de := el.Value.(*diskEntry)
	c.diskLRU.Remove(el)
	delete(c.disk, key)
	c.diskUsed -= de.bytes
	if de.stamp != stamp {
		os.Remove(de.path)
		return nil
	}
	return de
}

// spill writes evicted shards to the spill directory, evicting the oldest spilled shards
// beyond the disk budget.
func (c *shardCache) spill(evicted []*cacheEntry) {
	if c.spillDir == "" {
		return
	}
	for _, e := range evicted {
		if e.bytes > c.diskBudget {
			continue
		}
		path := filepath.Join(c.spillDir, hex.EncodeToString(e.key[:])+".shard")
		if err := writeSpill(path, e.tab); err != nil {
			c.log.Warn().Err(err).Str("shard", e.key.String()).Msg("cannot spill shard to disk")
			os.Remove(path)
			continue
		}
		var drop []string
		c.mu.Lock()
		if _, loaded := c.items[e.key]; loaded {
			c.mu.Unlock()
			os.Remove(path) // loaded again meanwhile
			continue
		}
		if old, ok := c.disk[e.key]; ok {
			c.diskUsed -= old.Value.(*diskEntry).bytes
			c.diskLRU.Remove(old)
		}
		c.disk[e.key] = c.diskLRU.PushFront(&diskEntry{key: e.key, stamp: e.stamp, path: path, bytes: e.bytes})
		c.diskUsed += e.bytes
		for c.diskUsed > c.diskBudget {
			el := c.diskLRU.Back()
			de := el.Value.(*diskEntry)
			c.diskLRU.Remove(el)
			delete(c.disk, de.key)
			c.diskUsed -= de.bytes
			drop = append(drop, de.path)
		}
		c.mu.Unlock()
		for _, p := range drop {
			os.Remove(p)
		}
	}
}

func writeSpill(path string, t *shard.Table) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("spill shard: %w", err)
	}
	if err := gob.NewEncoder(f).Encode(t); err != nil {
		f.Close()
		return fmt.Errorf("spill shard to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("spill shard to %s: %w", path, err)
	}
	return nil
}

func readSpill(path string) (*shard.Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read spilled shard: %w", err)
	}
	defer f.Close()
	var t shard.Table
	if err := gob.NewDecoder(f).Decode(&t); err != nil {
		return nil, fmt.Errorf("read spilled shard %s: %w", path, err)
	}
	if t.X == nil {
		t.X = []float64{}
	}
	if t.Y == nil {
		t.Y = []float64{}
	}
	return &t, nil
}
