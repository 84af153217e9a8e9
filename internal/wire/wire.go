package wire

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// EncodeTask returns the message form of a map step: its kind's message (tasks.Of, Kind.Encode)
// in the kind's field of the oneof of pb.Task.
func EncodeTask(t engine.Task) (*pb.Task, error) {
	k, ok := tasks.Of(t)
	if !ok {
		return nil, fmt.Errorf("encode task: %T has no wire form", t)
	}
	m, err := k.Encode(t)
	if err != nil {
		return nil, fmt.Errorf("encode task: %w", err)
	}
	msg, err := tasks.Wrap(k.Name, m)
	if err != nil {
		return nil, fmt.Errorf("encode task: %w", err)
	}
	return msg, nil
}

// Decoder turns task messages back into map steps (tasks.Lookup, Kind.Decode). It is the
// tasks.Env of the kinds' decoders: it caches the values they build from messages by the hash
// of the message, so the many tasks of a job share one feature map (tasks.MapCache, a
// Gauss-Legendre grid costs O(m^2) per dimension to compute) or one kernel op
// (tasks.OpCache). A kernel op holds the kernel blocks of one hyperparameter value (up to its
// CacheBytes, possibly GiBs), so only the two most recently used are kept. The kernel inputs
// are broadcast blobs, kept in a BlobCache by hash: a full op stores its inputs there (after
// checking their hash) and a slim op, which names them by hash, takes them from there,
// failing with a *MissingBlobError when they are not held. It is safe for concurrent use.
type Decoder struct {
	maps  hashCache // tasks.MapCache
	ops   hashCache // tasks.OpCache
	blobs *BlobCache
}

// Cache sizes of a Decoder: feature maps, and kernel ops (the current hyperparameter value
// and the one before, so a straggling task of the previous value does not evict the current).
const (
	decoderCacheSize  = 16
	kernelOpCacheSize = 2
)

// NewDecoder returns an empty decoder with a blob cache of DefaultBlobCacheBytes.
func NewDecoder() *Decoder { return NewDecoderWithBlobs(nil) }

// NewDecoderWithBlobs returns an empty decoder keeping blobs in c (nil: a new cache of
// DefaultBlobCacheBytes).
func NewDecoderWithBlobs(c *BlobCache) *Decoder {
	if c == nil {
		c = NewBlobCache(0)
	}
	return &Decoder{maps: hashCache{size: decoderCacheSize}, ops: hashCache{size: kernelOpCacheSize}, blobs: c}
}

// Blobs returns the decoder's blob cache.
func (d *Decoder) Blobs() *BlobCache { return d.blobs }

// DecodeTask returns the map step a message describes: the kind named by the field set in its
// oneof decodes it. A slim task whose blob the decoder does not hold fails with an error
// wrapping a *MissingBlobError, counted as a miss of the blob cache.
func (d *Decoder) DecodeTask(m *pb.Task) (engine.Task, error) {
	name, msg := tasks.Unwrap(m)
	k, ok := tasks.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("decode task: unknown kind %T", m.GetKind())
	}
	t, err := k.Decode(d, msg)
	if err != nil {
		if errors.Is(err, ErrMissingBlob) {
			d.blobs.misses.Add(1)
		}
		return nil, fmt.Errorf("decode task: %w", err)
	}
	return t, nil
}

// Shared implements tasks.Env: the value build makes of m, from the cache c names.
func (d *Decoder) Shared(c tasks.Cache, m proto.Message, build func() (any, error)) (any, error) {
	switch c {
	case tasks.MapCache:
		return d.maps.get(m, build)
	case tasks.OpCache:
		return d.ops.get(m, build)
	}
	return nil, fmt.Errorf("decoder: unknown cache %d", c)
}

// Blob implements tasks.Env: the held blob of hash h, or a *MissingBlobError.
func (d *Decoder) Blob(h [32]byte) ([]float64, error) {
	if x, ok := d.blobs.Get(h); ok {
		return x, nil
	}
	return nil, &MissingBlobError{Hash: h}
}

// KeepBlob implements tasks.Env: it holds blob x of hash h in the blob cache.
func (d *Decoder) KeepBlob(h [32]byte, x []float64) []float64 { return d.blobs.Put(h, x) }

// UsedBlob implements tasks.Env: it counts a blob hit and marks blob h most recently used.
func (d *Decoder) UsedBlob(h [32]byte) {
	d.blobs.hits.Add(1)
	d.blobs.Get(h)
}

// hashCache holds the values built from messages, keyed by the SHA-256 of the message's type
// and deterministic encoding, evicting the least recently used beyond size entries.
type hashCache struct {
	size  int
	mu    sync.Mutex
	cache map[[32]byte]any
	order [][32]byte // least recently used first
}

func (c *hashCache) get(m proto.Message, build func() (any, error)) (any, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	// The key covers the message type too, so maps of different kinds never share an entry.
	h := sha256.New()
	h.Write([]byte(proto.MessageName(m)))
	h.Write([]byte{0})
	h.Write(b)
	var key [32]byte
	h.Sum(key[:0])
	c.mu.Lock()
	v, ok := c.cache[key]
	if ok {
		c.touch(key)
	}
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err = build()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cache == nil {
		c.cache = map[[32]byte]any{}
	}
	if old, ok := c.cache[key]; ok { // another call built it meanwhile: share that one
		c.touch(key)
		return old, nil
	}
	c.cache[key] = v
	c.order = append(c.order, key)
	if len(c.order) > c.size {
		delete(c.cache, c.order[0])
		c.order = c.order[1:]
	}
	return v, nil
}

// touch moves key to the most recently used end of the order; the caller holds c.mu.
func (c *hashCache) touch(key [32]byte) {
	for i, k := range c.order {
		if k == key {
			c.order = append(append(c.order[:i:i], c.order[i+1:]...), key)
			return
		}
	}
}

// EncodeStats returns the message form of a shard statistic (tasks.EncodeStats: the
// statistics registry of package tasks).
func EncodeStats(s reduce.Stats) (*pb.Stats, error) { return tasks.EncodeStats(s) }

// DecodeStats checks the shapes of a statistic message and returns the statistic
// (tasks.DecodeStats: the statistics registry of package tasks).
func DecodeStats(m *pb.Stats) (reduce.Stats, error) { return tasks.DecodeStats(m) }

// EncodeRef returns the message form of a shard reference.
func EncodeRef(r shard.Ref) *pb.ShardRef {
	return &pb.ShardRef{Index: int32(r.Index), Source: r.Source, Offset: r.Offset, Length: r.Length, First: int64(r.First), Rows: int64(r.Rows)}
}

// DecodeRef returns a shard reference.
func DecodeRef(m *pb.ShardRef) shard.Ref {
	return shard.Ref{Index: int(m.GetIndex()), Source: m.GetSource(), Offset: m.GetOffset(), Length: m.GetLength(), First: int(m.GetFirst()), Rows: int(m.GetRows())}
}

// EncodeSource returns the message form of a data source.
func EncodeSource(s shard.Source) *pb.DataSource {
	return &pb.DataSource{Uri: s.URI, Format: s.Format, Split: int32(s.Split), Header: s.Header, Target: s.Target, Columns: s.Columns, TrainRows: int64(s.TrainRows)}
}

// DecodeSource returns a data source.
func DecodeSource(m *pb.DataSource) shard.Source {
	return shard.Source{URI: m.GetUri(), Format: m.GetFormat(), Split: int(m.GetSplit()), Header: m.GetHeader(), Target: m.GetTarget(), Columns: m.GetColumns(), TrainRows: int(m.GetTrainRows())}
}
