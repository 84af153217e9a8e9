package wire

import (
	"crypto/sha256"
	"fmt"
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
	case *train.GramTask:
		gl, ok := t.Features.(*features.GL)
		if !ok {
			return nil, fmt.Errorf("encode task: Gram task over %T features has no wire form", t.Features)
		}
		nodes := make([]int32, len(gl.NodesPerDim))
		for i, v := range gl.NodesPerDim {
			nodes[i] = int32(v)
		}
		return &pb.Task{Kind: &pb.Task_Gram{Gram: &pb.GramTask{
			Gl:        &pb.GLMap{Kernel: gl.Family.String(), U: gl.U, NodesPerDim: nodes},
			Transform: EncodeTransform(t.Transform),
		}}}, nil
	case *train.RFFTask:
		return &pb.Task{Kind: &pb.Task_Rff{Rff: &pb.RFFTask{
			Rff:          &pb.RFFMap{Kernel: t.RFF.Family.String(), D: int32(t.RFF.D), Omega: t.RFF.Omega},
			Transform:    EncodeTransform(t.Transform),
			Lengthscales: t.Lengthscales,
			Grad:         t.Grad,
		}}}, nil
	case *train.RowsTask:
		return &pb.Task{Kind: &pb.Task_Rows{Rows: &pb.RowsTask{Transform: EncodeTransform(t.Transform)}}}, nil
	}
	return nil, fmt.Errorf("encode task: %T has no wire form", t)
}

// Decoder turns task messages back into map steps. It caches the feature maps it builds
// (a Gauss-Legendre grid costs O(m^2) per dimension to compute) by the hash of their message,
// so the many tasks of a job share one map. It is safe for concurrent use.
type Decoder struct {
	mu    sync.Mutex
	cache map[[32]byte]any
	order [][32]byte
}

// decoderCacheSize bounds the feature maps a Decoder keeps.
const decoderCacheSize = 16

// NewDecoder returns an empty decoder.
func NewDecoder() *Decoder { return &Decoder{cache: map[[32]byte]any{}} }

func (d *Decoder) cached(m proto.Message, build func() (any, error)) (any, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256(b)
	d.mu.Lock()
	v, ok := d.cache[key]
	d.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err = build()
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.cache[key]; !ok {
		d.cache[key] = v
		d.order = append(d.order, key)
		if len(d.order) > decoderCacheSize {
			delete(d.cache, d.order[0])
			d.order = d.order[1:]
		}
	}
	return d.cache[key], nil
}

// DecodeTask returns the map step a message describes.
func (d *Decoder) DecodeTask(m *pb.Task) (engine.Task, error) {
	switch k := m.GetKind().(type) {
	case *pb.Task_Moments:
		return shard.MomentsTask{}, nil
	case *pb.Task_Gram:
		g := k.Gram
		if g.GetGl() == nil || g.GetTransform() == nil {
			return nil, fmt.Errorf("decode task: Gram task without feature map or transform")
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
		return &train.GramTask{Features: v.(*features.GL), Transform: tf}, nil
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
	return &pb.DataSource{Uri: s.URI, Format: s.Format, Split: int32(s.Split), Header: s.Header, Target: s.Target, Columns: s.Columns}
}

// DecodeSource returns a data source.
func DecodeSource(m *pb.DataSource) shard.Source {
	return shard.Source{URI: m.GetUri(), Format: m.GetFormat(), Split: int(m.GetSplit()), Header: m.GetHeader(), Target: m.GetTarget(), Columns: m.GetColumns()}
}
