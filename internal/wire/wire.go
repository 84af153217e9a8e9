package wire

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/features"
	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/train"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// EncodeTask returns the message form of a map step.
func EncodeTask(t engine.Task) (*pb.Task, error) {
	switch t := t.(type) {
	case shard.MomentsTask, *shard.MomentsTask:
		return &pb.Task{Kind: &pb.Task_Moments{Moments: &pb.MomentsTask{}}}, nil
	case shard.DistinctTask:
		return encodeDistinctTask(t)
	case *shard.DistinctTask:
		return encodeDistinctTask(*t)
	case shard.SampleTask:
		return encodeSampleTask(t)
	case *shard.SampleTask:
		return encodeSampleTask(*t)
	case *train.GramTask:
		switch f := t.Features.(type) {
		case *features.GL:
			nodes := make([]int32, len(f.NodesPerDim))
			for i, v := range f.NodesPerDim {
				nodes[i] = int32(v)
			}
			return &pb.Task{Kind: &pb.Task_Gram{Gram: &pb.GramTask{
				Gl:        &pb.GLMap{Kernel: f.Family.String(), U: f.U, NodesPerDim: nodes},
				Transform: EncodeTransform(t.Transform),
			}}}, nil
		case *features.GRIEF:
			m, err := EncodeGRIEF(f)
			if err != nil {
				return nil, err
			}
			return &pb.Task{Kind: &pb.Task_Gram{Gram: &pb.GramTask{Grief: m, Transform: EncodeTransform(t.Transform)}}}, nil
		}
		return nil, fmt.Errorf("encode task: Gram task over %T features has no wire form", t.Features)
	case *train.RFFTask:
		return &pb.Task{Kind: &pb.Task_Rff{Rff: &pb.RFFTask{
			Rff:          &pb.RFFMap{Kernel: t.RFF.Family.String(), D: int32(t.RFF.D), Omega: t.RFF.Omega},
			Transform:    EncodeTransform(t.Transform),
			Lengthscales: t.Lengthscales,
			Grad:         t.Grad,
		}}}, nil
	case *train.RowsTask:
		return &pb.Task{Kind: &pb.Task_Rows{Rows: &pb.RowsTask{Transform: EncodeTransform(t.Transform)}}}, nil
	case *train.KernelTask:
		return encodeKernelTask(t)
	}
	return nil, fmt.Errorf("encode task: %T has no wire form", t)
}

// encodeKernelTask returns the message of a kernel map step. Only the vectors its kind uses
// are sent; the op's CacheBytes is a per-process setting and is not. The op carries the
// inputs X in full with their SHA-256 (Slim strips them); inputs above MaxBroadcastBytes are
// rejected, since blobs are not chunked and a task must fit one gRPC message.
func encodeKernelTask(t *train.KernelTask) (*pb.Task, error) {
	if t.Op == nil {
		return nil, fmt.Errorf("encode task: kernel task without a kernel op")
	}
	if b := int64(len(t.Op.X)) * 8; b > broadcastLimit {
		return nil, fmt.Errorf("encode task: kernel inputs of %d bytes exceed the broadcast limit of %d bytes; use fewer rows or fewer rows per job",
			b, broadcastLimit)
	}
	if err := t.Op.Validate(); err != nil {
		return nil, fmt.Errorf("encode task: %w", err)
	}
	if err := t.Check(); err != nil {
		return nil, fmt.Errorf("encode task: %w", err)
	}
	op := t.Op
	offsets := make([]int64, len(op.Offsets))
	for i, v := range op.Offsets {
		offsets[i] = int64(v)
	}
	sum := HashFloats(op.X)
	m := &pb.KernelTask{
		Op: &pb.KernelOp{
			Kernel:         op.Kernel.Family.String(),
			Lengthscales:   op.Kernel.Lengthscales,
			SignalVariance: op.Kernel.SignalVariance,
			X:              op.X,
			Offsets:        offsets,
			XSha256:        sum[:],
		},
		Kind: int32(t.Kind),
	}
	if t.Kind == train.KernelMVM || t.Kind == train.KernelQuad {
		if t.K > math.MaxInt32 {
			return nil, fmt.Errorf("encode task: kernel task of %d vectors", t.K)
		}
		m.K = int32(t.K)
	}
	switch t.Kind {
	case train.KernelMVM:
		m.V = t.V
	case train.KernelQuad:
		m.A, m.B = t.A, t.B
	}
	if t.Kind == train.KernelMVM || t.Kind == train.KernelCols {
		for _, v := range t.Idx {
			if v > math.MaxInt32 {
				return nil, fmt.Errorf("encode task: kernel column %d", v)
			}
			m.Idx = append(m.Idx, int32(v))
		}
	}
	return &pb.Task{Kind: &pb.Task_Kernel{Kernel: m}}, nil
}

func encodeDistinctTask(t shard.DistinctTask) (*pb.Task, error) {
	if t.Cap < 0 || t.Cap > math.MaxInt32-1 {
		return nil, fmt.Errorf("encode task: distinct task with cap %d", t.Cap)
	}
	return &pb.Task{Kind: &pb.Task_Distinct{Distinct: &pb.DistinctTask{Cap: int32(t.Cap)}}}, nil
}

func encodeSampleTask(t shard.SampleTask) (*pb.Task, error) {
	if t.K < 0 || t.K > math.MaxInt32 {
		return nil, fmt.Errorf("encode task: sample task of %d rows", t.K)
	}
	return &pb.Task{Kind: &pb.Task_Sample{Sample: &pb.SampleTask{K: int32(t.K), Seed: t.Seed}}}, nil
}

// EncodeGRIEF returns the message form of a GP-GRIEF map. It carries the eigendecompositions and
// the selection exactly, so every node evaluates the same features (digest 001, pitfall 4).
func EncodeGRIEF(g *features.GRIEF) (*pb.GRIEFMap, error) {
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("encode task: %w", err)
	}
	vecs := func(vs [][]float64) []*pb.Vector {
		out := make([]*pb.Vector, len(vs))
		for i, v := range vs {
			out[i] = &pb.Vector{Values: v}
		}
		return out
	}
	idx := make([]int32, len(g.Idx))
	for i, v := range g.Idx {
		idx[i] = int32(v) // Validate bounds it by a grid size
	}
	return &pb.GRIEFMap{
		Kernel:         g.Family.String(),
		Lengthscales:   g.Lengthscales,
		SignalVariance: g.SignalVariance,
		Grid:           vecs(g.Grid),
		Q:              vecs(g.Q),
		LogLam:         vecs(g.LogLam),
		Idx:            idx,
		LogLamP:        g.LogLamP,
	}, nil
}

// DecodeGRIEF returns the GP-GRIEF map a message describes, after GRIEF.Validate.
func DecodeGRIEF(m *pb.GRIEFMap) (*features.GRIEF, error) {
	fam, err := kernel.ParseFamily(m.GetKernel())
	if err != nil {
		return nil, err
	}
	vals := func(vs []*pb.Vector) [][]float64 {
		out := make([][]float64, len(vs))
		for i, v := range vs {
			out[i] = v.GetValues()
		}
		return out
	}
	idx := make([]int, len(m.GetIdx()))
	for i, v := range m.GetIdx() {
		idx[i] = int(v)
	}
	g := &features.GRIEF{
		Family:         fam,
		Lengthscales:   m.GetLengthscales(),
		SignalVariance: m.GetSignalVariance(),
		Grid:           vals(m.GetGrid()),
		Q:              vals(m.GetQ()),
		LogLam:         vals(m.GetLogLam()),
		Idx:            idx,
		LogLamP:        m.GetLogLamP(),
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return g, nil
}

// Decoder turns task messages back into map steps. It caches the feature maps it builds
// (a Gauss-Legendre grid costs O(m^2) per dimension to compute) by the hash of their message,
// so the many tasks of a job share one map. Kernel ops have their own, smaller cache: every
// task of one hyperparameter value shares one *train.KernelOp, which holds that value's
// kernel blocks (up to its CacheBytes, possibly GiBs), so only the two most recently used are
// kept. Ops are keyed by their slim form (the inputs' hash, the kernel and the offsets), so
// a task's key never hashes the inputs themselves. The inputs are broadcast blobs, kept in a
// BlobCache by hash: a full op stores its inputs there (after checking their hash) and a slim
// op, which names them by hash, takes them from there, failing with a *MissingBlobError when
// they are not held. It is safe for concurrent use.
type Decoder struct {
	maps  hashCache // feature maps
	ops   hashCache // *train.KernelOp
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

// hashCache holds the values built from messages, keyed by the SHA-256 of the message's type
// and deterministic encoding, evicting the least recently used beyond size entries.
type hashCache struct {
	size  int
	mu    sync.Mutex
	cache map[[32]byte]any
	order [][32]byte // least recently used first
}

func (d *Decoder) cached(m proto.Message, build func() (any, error)) (any, error) {
	return d.maps.get(m, build)
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

// kernelOp returns the kernel op a message describes, shared with earlier messages of the same
// op whether full or slim (see Decoder).
func (d *Decoder) kernelOp(m *pb.KernelOp) (*train.KernelOp, error) {
	x, sum := m.GetX(), m.GetXSha256()
	var h [32]byte
	switch {
	case len(sum) != 0 && len(sum) != sha256.Size:
		return nil, fmt.Errorf("kernel op: x_sha256 of %d bytes, want %d", len(sum), sha256.Size)
	case len(x) > 0:
		h = HashFloats(x)
		if len(sum) > 0 && !bytes.Equal(sum, h[:]) {
			return nil, errHashMismatch(sum, h)
		}
	case len(sum) == 0:
		return nil, fmt.Errorf("kernel op: no input values and no x_sha256")
	default:
		copy(h[:], sum)
	}
	full := len(x) > 0
	v, err := d.ops.get(slimOp(m, h), func() (any, error) {
		// A held blob is used even for a full op, so that ops and the cache share one copy.
		if held, ok := d.blobs.Get(h); ok {
			x = held
		} else if !full {
			return nil, &MissingBlobError{Hash: h}
		}
		return decodeKernelOp(m, x)
	})
	if err != nil {
		if errors.Is(err, ErrMissingBlob) {
			d.blobs.misses.Add(1)
		}
		return nil, err
	}
	op, ok := v.(*train.KernelOp)
	if !ok {
		return nil, fmt.Errorf("cached kernel op is a %T", v)
	}
	if full {
		d.blobs.Put(h, op.X) // the op's inputs passed Validate
	} else {
		d.blobs.hits.Add(1)
		d.blobs.Get(h) // keep the blob fresh while its ops are in use
	}
	return op, nil
}

// decodeKernelOp builds the kernel op a message with inputs x describes, after
// KernelOp.Validate.
func decodeKernelOp(m *pb.KernelOp, x []float64) (*train.KernelOp, error) {
	fam, err := kernel.ParseFamily(m.GetKernel())
	if err != nil {
		return nil, err
	}
	offsets := make([]int, len(m.GetOffsets()))
	for i, v := range m.GetOffsets() {
		if v < 0 || int64(int(v)) != v {
			return nil, fmt.Errorf("kernel op: shard offset %d", v)
		}
		offsets[i] = int(v)
	}
	op := &train.KernelOp{
		Kernel:  kernel.Kernel{Family: fam, Lengthscales: m.GetLengthscales(), SignalVariance: m.GetSignalVariance()},
		X:       x,
		Offsets: offsets,
	}
	if err := op.Validate(); err != nil {
		return nil, err
	}
	return op, nil
}

// decodeKernelTask returns the kernel map step a message describes, sharing the kernel op
// of earlier tasks with the same op message.
func (d *Decoder) decodeKernelTask(m *pb.KernelTask) (*train.KernelTask, error) {
	if m.GetOp() == nil {
		return nil, fmt.Errorf("decode task: kernel task without a kernel op")
	}
	kind := train.KernelTaskKind(m.GetKind())
	var unused []string // vectors the kind does not read: a malformed message
	switch kind {
	case train.KernelMVM:
		if len(m.GetA())+len(m.GetB()) > 0 {
			unused = append(unused, "a, b")
		}
	case train.KernelQuad:
		if len(m.GetV()) > 0 {
			unused = append(unused, "v")
		}
		if len(m.GetIdx()) > 0 {
			unused = append(unused, "idx")
		}
	case train.KernelCols:
		if len(m.GetV())+len(m.GetA())+len(m.GetB()) > 0 {
			unused = append(unused, "v, a, b")
		}
		if m.GetK() != 0 {
			unused = append(unused, "k")
		}
	default:
		return nil, fmt.Errorf("decode task: kernel task of unknown kind %d", m.GetKind())
	}
	if len(unused) > 0 {
		return nil, fmt.Errorf("decode task: kernel task of kind %d sets %s, which it does not use", m.GetKind(), strings.Join(unused, " and "))
	}
	op, err := d.kernelOp(m.GetOp())
	if err != nil {
		return nil, fmt.Errorf("decode task: %w", err)
	}
	t := &train.KernelTask{Op: op, Kind: kind, K: int(m.GetK()), V: m.GetV(), A: m.GetA(), B: m.GetB()}
	if len(m.GetIdx()) > 0 {
		t.Idx = make([]int, len(m.GetIdx()))
		for i, c := range m.GetIdx() {
			t.Idx[i] = int(c)
		}
	}
	if err := t.Check(); err != nil {
		return nil, fmt.Errorf("decode task: %w", err)
	}
	return t, nil
}

// DecodeTask returns the map step a message describes.
func (d *Decoder) DecodeTask(m *pb.Task) (engine.Task, error) {
	switch k := m.GetKind().(type) {
	case *pb.Task_Moments:
		return shard.MomentsTask{}, nil
	case *pb.Task_Distinct:
		c := k.Distinct.GetCap()
		if c < 0 {
			return nil, fmt.Errorf("decode task: distinct task with cap %d", c)
		}
		return shard.DistinctTask{Cap: int(c)}, nil
	case *pb.Task_Sample:
		n := k.Sample.GetK()
		if n < 0 {
			return nil, fmt.Errorf("decode task: sample task of %d rows", n)
		}
		return shard.SampleTask{K: int(n), Seed: k.Sample.GetSeed()}, nil
	case *pb.Task_Gram:
		g := k.Gram
		if g.GetTransform() == nil || (g.GetGl() == nil) == (g.GetGrief() == nil) {
			return nil, fmt.Errorf("decode task: Gram task needs a transform and exactly one feature map (gl or grief)")
		}
		if g.GetGrief() != nil {
			v, err := d.cached(g.Grief, func() (any, error) { return DecodeGRIEF(g.Grief) })
			if err != nil {
				return nil, fmt.Errorf("decode task: %w", err)
			}
			gr, ok := v.(*features.GRIEF)
			if !ok {
				return nil, fmt.Errorf("decode task: cached feature map is a %T", v)
			}
			tf, err := DecodeTransform(g.Transform)
			if err != nil {
				return nil, err
			}
			if len(tf.XMean) != gr.Dim() {
				return nil, fmt.Errorf("decode task: GRIEF map of %d inputs with a transform of %d", gr.Dim(), len(tf.XMean))
			}
			return &train.GramTask{Features: gr, Transform: tf}, nil
		}
		v, err := d.cached(g.Gl, func() (any, error) {
			fam, err := kernel.ParseFamily(g.Gl.Kernel)
			if err != nil {
				return nil, err
			}
			nodes := make([]int, len(g.Gl.NodesPerDim))
			for i, v := range g.Gl.NodesPerDim {
				nodes[i] = int(v)
			}
			return features.NewGL(fam, g.Gl.U, nodes)
		})
		if err != nil {
			return nil, fmt.Errorf("decode task: %w", err)
		}
		tf, err := DecodeTransform(g.Transform)
		if err != nil {
			return nil, err
		}
		gl, ok := v.(*features.GL)
		if !ok {
			return nil, fmt.Errorf("decode task: cached feature map is a %T", v)
		}
		return &train.GramTask{Features: gl, Transform: tf}, nil
	case *pb.Task_Rff:
		r := k.Rff
		if r.GetRff() == nil || r.GetTransform() == nil {
			return nil, fmt.Errorf("decode task: RFF task without feature map or transform")
		}
		fam, err := kernel.ParseFamily(r.Rff.Kernel)
		if err != nil {
			return nil, fmt.Errorf("decode task: %w", err)
		}
		dd := int(r.Rff.D)
		if dd < 1 || len(r.Rff.Omega)%dd != 0 || len(r.Rff.Omega) == 0 || len(r.Lengthscales) != dd {
			return nil, fmt.Errorf("decode task: RFF map of %d frequencies, d=%d, %d lengthscales", len(r.Rff.Omega), dd, len(r.Lengthscales))
		}
		tf, err := DecodeTransform(r.Transform)
		if err != nil {
			return nil, err
		}
		return &train.RFFTask{RFF: &features.RFF{Family: fam, D: dd, Omega: r.Rff.Omega}, Transform: tf, Lengthscales: r.Lengthscales, Grad: r.Grad}, nil
	case *pb.Task_Rows:
		tf, err := DecodeTransform(k.Rows.GetTransform())
		if err != nil {
			return nil, err
		}
		return &train.RowsTask{Transform: tf}, nil
	case *pb.Task_Kernel:
		return d.decodeKernelTask(k.Kernel)
	}
	return nil, fmt.Errorf("decode task: unknown kind %T", m.GetKind())
}

// EncodeTransform returns the message form of a standardization.
func EncodeTransform(t shard.Transform) *pb.Transform {
	return &pb.Transform{XMean: t.XMean, XScale: t.XScale, YMean: t.YMean, YScale: t.YScale}
}

// DecodeTransform checks and returns a standardization.
func DecodeTransform(m *pb.Transform) (shard.Transform, error) {
	if m == nil || len(m.XMean) == 0 || len(m.XMean) != len(m.XScale) || !(m.YScale > 0) {
		return shard.Transform{}, fmt.Errorf("decode task: malformed transform")
	}
	return shard.Transform{XMean: m.XMean, XScale: m.XScale, YMean: m.YMean, YScale: m.YScale}, nil
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
