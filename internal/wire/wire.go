package wire

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
	"github.com/gpreduce/gpreduce/internal/vof"
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

// EncodeStats returns the message form of a shard statistic.
func EncodeStats(s reduce.Stats) (*pb.Stats, error) {
	switch s := s.(type) {
	case *reduce.Gram:
		return &pb.Stats{Kind: &pb.Stats_Gram{Gram: &pb.Gram{S: int32(s.S), G: s.G, B: s.B, Yy: s.YY, N: int64(s.N)}}}, nil
	case *reduce.Moments:
		return &pb.Stats{Kind: &pb.Stats_Moments{Moments: &pb.Moments{N: int64(s.N), Mean: s.Mean, M2: s.M2, Min: s.Min, Max: s.Max}}}, nil
	case *reduce.Sum:
		parts := make([]*pb.Vector, len(s.Parts))
		for i, p := range s.Parts {
			parts[i] = &pb.Vector{Values: p}
		}
		return &pb.Stats{Kind: &pb.Stats_Sum{Sum: &pb.Sum{Parts: parts, N: int64(s.N)}}}, nil
	case *reduce.Rows:
		return &pb.Stats{Kind: &pb.Stats_Rows{Rows: &pb.Rows{D: int32(s.D), X: s.X, Y: s.Y}}}, nil
	case *reduce.Distinct:
		if s.Cap < 0 || s.Cap > math.MaxInt32 {
			return nil, fmt.Errorf("encode stats: distinct values with cap %d", s.Cap)
		}
		vals := make([]*pb.Vector, len(s.Values))
		for i, v := range s.Values {
			vals[i] = &pb.Vector{Values: v}
		}
		return &pb.Stats{Kind: &pb.Stats_Distinct{Distinct: &pb.Distinct{Cap: int32(s.Cap), Values: vals}}}, nil
	case *reduce.Sample:
		if s.K < 0 || s.K > math.MaxInt32 || s.D < 0 || s.D > math.MaxInt32 {
			return nil, fmt.Errorf("encode stats: sample of %d rows of %d columns", s.K, s.D)
		}
		return &pb.Stats{Kind: &pb.Stats_Sample{Sample: &pb.Sample{K: int32(s.K), Keys: s.Keys, D: int32(s.D), X: s.X, Y: s.Y}}}, nil
	case *vof.KufStats:
		return &pb.Stats{Kind: &pb.Stats_VofKuf{VofKuf: &pb.VOFKufStats{M: int32(s.M), NShape: int32(s.NShape), N: int64(s.N),
			Theta: s.Theta, Yy: s.YY, Ky: s.KY, Kk: s.KK, Dky: s.DKY, Dkk: s.DKK}}}, nil
	case *vof.TrigStats:
		vecs := func(blocks ...[4][]float64) []*pb.Vector {
			var out []*pb.Vector
			for _, b := range blocks {
				for _, v := range b {
					out = append(out, &pb.Vector{Values: v})
				}
			}
			return out
		}
		return &pb.Stats{Kind: &pb.Stats_VofTrig{VofTrig: &pb.VOFTrigStats{T: int32(s.T), D: int32(s.Dim), Grid: s.Grid, N: int64(s.N), Yy: s.YY,
			B: vecs(s.B), P: vecs(s.P), Xb: vecs(s.XB...), Xp: vecs(s.XP...)}}}, nil
	}
	return nil, fmt.Errorf("encode stats: %T has no wire form", s)
}

// DecodeStats checks the shapes of a statistic message and returns the statistic.
func DecodeStats(m *pb.Stats) (reduce.Stats, error) {
	switch k := m.GetKind().(type) {
	case *pb.Stats_Gram:
		g := k.Gram
		s := int(g.S)
		if s < 1 || len(g.G) != s*s || len(g.B) != s {
			return nil, fmt.Errorf("decode stats: Gram of %d features with %d and %d values", s, len(g.G), len(g.B))
		}
		return &reduce.Gram{S: s, G: g.G, B: g.B, YY: g.Yy, N: int(g.N)}, nil
	case *pb.Stats_Moments:
		mm := k.Moments
		c := len(mm.Mean)
		if c == 0 || len(mm.M2) != c || len(mm.Min) != c || len(mm.Max) != c {
			return nil, fmt.Errorf("decode stats: malformed moments")
		}
		return &reduce.Moments{N: int(mm.N), Mean: mm.Mean, M2: mm.M2, Min: mm.Min, Max: mm.Max}, nil
	case *pb.Stats_Sum:
		parts := make([][]float64, len(k.Sum.Parts))
		for i, p := range k.Sum.Parts {
			parts[i] = p.GetValues()
			if parts[i] == nil {
				parts[i] = []float64{}
			}
		}
		return &reduce.Sum{Parts: parts, N: int(k.Sum.N)}, nil
	case *pb.Stats_Rows:
		r := k.Rows
		if r.D < 1 || len(r.X) != len(r.Y)*int(r.D) {
			return nil, fmt.Errorf("decode stats: %d values for %d rows of %d columns", len(r.X), len(r.Y), r.D)
		}
		return &reduce.Rows{D: int(r.D), X: r.X, Y: r.Y}, nil
	case *pb.Stats_Distinct:
		dm := k.Distinct
		c := int(dm.Cap)
		if c < 0 {
			return nil, fmt.Errorf("decode stats: distinct values with cap %d", c)
		}
		vals := make([][]float64, len(dm.Values))
		for j, v := range dm.Values {
			vs := v.GetValues()
			if len(vs) > c+1 {
				return nil, fmt.Errorf("decode stats: distinct values: column %d holds %d values, more than cap+1 = %d", j, len(vs), c+1)
			}
			for i := 1; i < len(vs); i++ {
				if !(vs[i] > vs[i-1]) {
					return nil, fmt.Errorf("decode stats: distinct values: column %d is not strictly increasing", j)
				}
			}
			if vs == nil {
				vs = []float64{}
			}
			vals[j] = vs
		}
		return &reduce.Distinct{Cap: c, Values: vals}, nil
	case *pb.Stats_Sample:
		sm := k.Sample
		kk, dd, n := int(sm.K), int(sm.D), len(sm.Keys)
		if kk < 0 || dd < 0 || n > kk || len(sm.Y) != n || len(sm.X) != n*dd {
			return nil, fmt.Errorf("decode stats: sample of at most %d rows of %d columns with %d keys, %d values and %d targets", kk, dd, n, len(sm.X), len(sm.Y))
		}
		for i, u := range sm.Keys {
			if u != u || (i > 0 && u < sm.Keys[i-1]) {
				return nil, fmt.Errorf("decode stats: sample keys are not in increasing order")
			}
		}
		nz := func(v []float64) []float64 {
			if v == nil {
				return []float64{}
			}
			return v
		}
		return &reduce.Sample{K: kk, Keys: nz(sm.Keys), D: dd, X: nz(sm.X), Y: nz(sm.Y)}, nil
	case *pb.Stats_VofKuf:
		v := k.VofKuf
		M, P := int(v.M), int(v.NShape)
		hasGrad := len(v.Dky) > 0 || len(v.Dkk) > 0
		if M < 1 || P < 0 || v.N < 0 || len(v.Ky) != M || len(v.Kk) != M*M || (hasGrad && (len(v.Dky) != P*M || len(v.Dkk) != P*M*M)) {
			return nil, fmt.Errorf("decode stats: VOF statistics of %d features and %d directions with %d, %d, %d and %d values", M, P, len(v.Ky), len(v.Kk), len(v.Dky), len(v.Dkk))
		}
		return &vof.KufStats{M: M, NShape: P, N: int(v.N), Theta: v.Theta, YY: v.Yy, KY: v.Ky, KK: v.Kk, DKY: v.Dky, DKK: v.Dkk}, nil
	case *pb.Stats_VofTrig:
		v := k.VofTrig
		T, d := int(v.T), int(v.D)
		if T < 1 || d < 1 || v.N < 0 || len(v.B) != 4 || len(v.P) != 4 || len(v.Xb) != len(v.Xp) || (len(v.Xb) != 0 && len(v.Xb) != 4*d) {
			return nil, fmt.Errorf("decode stats: TrigVOF statistics of %d frequencies in %d inputs with %d, %d, %d and %d blocks", T, d, len(v.B), len(v.P), len(v.Xb), len(v.Xp))
		}
		st := &vof.TrigStats{T: T, Dim: d, Grid: v.Grid, N: int(v.N), YY: v.Yy}
		for i := 0; i < 4; i++ {
			st.B[i], st.P[i] = v.B[i].GetValues(), v.P[i].GetValues()
			if len(st.B[i]) != T || len(st.P[i]) != T*T {
				return nil, fmt.Errorf("decode stats: TrigVOF block %d has %d and %d values for %d frequencies", i, len(st.B[i]), len(st.P[i]), T)
			}
		}
		if len(v.Xb) > 0 {
			st.XB, st.XP = make([][4][]float64, d), make([][4][]float64, d)
			for kk := 0; kk < d; kk++ {
				for i := 0; i < 4; i++ {
					st.XB[kk][i], st.XP[kk][i] = v.Xb[4*kk+i].GetValues(), v.Xp[4*kk+i].GetValues()
					if len(st.XB[kk][i]) != T || len(st.XP[kk][i]) != T*T {
						return nil, fmt.Errorf("decode stats: TrigVOF moment block %d of input %d has %d and %d values for %d frequencies", i, kk, len(st.XB[kk][i]), len(st.XP[kk][i]), T)
					}
				}
			}
		}
		return st, nil
	}
	return nil, fmt.Errorf("decode stats: unknown kind %T", m.GetKind())
}

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
