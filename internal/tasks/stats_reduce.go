package tasks

import (
	"fmt"
	"math"

	"github.com/gpreduce/gpreduce/internal/reduce"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// The statistics of package reduce: Gram, Moments, Sum, Rows, Distinct and Sample.

func init() {
	registerStat(newStat("gram", encodeGramStats, decodeGramStats, func() reduce.Stats {
		return &reduce.Gram{S: 2, G: []float64{4, 1, 1, 3}, B: []float64{0.5, -2}, YY: 7.25, N: 11}
	}))
	registerStat(newStat("moments", encodeMomentsStats, decodeMomentsStats, func() reduce.Stats {
		return &reduce.Moments{N: 5, Mean: []float64{0.1, -3}, M2: []float64{2, 0.5}, Min: []float64{-1, -4}, Max: []float64{1.5, -2}}
	}))
	registerStat(newStat("sum", encodeSumStats, decodeSumStats, func() reduce.Stats {
		return &reduce.Sum{Parts: [][]float64{{1, -2.5, 3}, {}, {math.Pi}}, N: 40}
	}))
	registerStat(newStat("rows", encodeRowsStats, decodeRowsStats, func() reduce.Stats {
		return &reduce.Rows{D: 2, X: []float64{1, 2, 3, 4, 5, 6}, Y: []float64{0.5, -1, 2}}
	}))
	registerStat(newStat("distinct", encodeDistinctStats, decodeDistinctStats, func() reduce.Stats {
		return &reduce.Distinct{Cap: 2, Values: [][]float64{{-1, 0, 3}, {5}, {}}}
	}))
	registerStat(newStat("sample", encodeSampleStats, decodeSampleStats, func() reduce.Stats {
		return &reduce.Sample{K: 3, Keys: []float64{0.1, 0.1, 0.7}, D: 2, X: []float64{1, 2, 3, 4, 5, 6}, Y: []float64{-1, 0, 1}}
	}))
}

func encodeGramStats(s *reduce.Gram) (*pb.Gram, error) {
	return &pb.Gram{S: int32(s.S), G: s.G, B: s.B, Yy: s.YY, N: int64(s.N)}, nil
}

func decodeGramStats(g *pb.Gram) (reduce.Stats, error) {
	s := int(g.GetS())
	if s < 1 || len(g.GetG()) != s*s || len(g.GetB()) != s {
		return nil, fmt.Errorf("Gram of %d features with %d and %d values", s, len(g.GetG()), len(g.GetB()))
	}
	return &reduce.Gram{S: s, G: g.GetG(), B: g.GetB(), YY: g.GetYy(), N: int(g.GetN())}, nil
}

func encodeMomentsStats(s *reduce.Moments) (*pb.Moments, error) {
	return &pb.Moments{N: int64(s.N), Mean: s.Mean, M2: s.M2, Min: s.Min, Max: s.Max}, nil
}

func decodeMomentsStats(m *pb.Moments) (reduce.Stats, error) {
	c := len(m.GetMean())
	if c == 0 || len(m.GetM2()) != c || len(m.GetMin()) != c || len(m.GetMax()) != c {
		return nil, fmt.Errorf("malformed moments")
	}
	return &reduce.Moments{N: int(m.GetN()), Mean: m.GetMean(), M2: m.GetM2(), Min: m.GetMin(), Max: m.GetMax()}, nil
}

func encodeSumStats(s *reduce.Sum) (*pb.Sum, error) {
	return &pb.Sum{Parts: vectors(s.Parts), N: int64(s.N)}, nil
}

func decodeSumStats(m *pb.Sum) (reduce.Stats, error) {
	parts := make([][]float64, len(m.GetParts()))
	for i, p := range m.GetParts() {
		parts[i] = nonNil(p.GetValues())
	}
	return &reduce.Sum{Parts: parts, N: int(m.GetN())}, nil
}

func encodeRowsStats(s *reduce.Rows) (*pb.Rows, error) {
	return &pb.Rows{D: int32(s.D), X: s.X, Y: s.Y}, nil
}

func decodeRowsStats(r *pb.Rows) (reduce.Stats, error) {
	if r.GetD() < 1 || len(r.GetX()) != len(r.GetY())*int(r.GetD()) {
		return nil, fmt.Errorf("%d values for %d rows of %d columns", len(r.GetX()), len(r.GetY()), r.GetD())
	}
	return &reduce.Rows{D: int(r.GetD()), X: r.GetX(), Y: r.GetY()}, nil
}

func encodeDistinctStats(s *reduce.Distinct) (*pb.Distinct, error) {
	if s.Cap < 0 || s.Cap > math.MaxInt32 {
		return nil, fmt.Errorf("distinct values with cap %d", s.Cap)
	}
	return &pb.Distinct{Cap: int32(s.Cap), Values: vectors(s.Values)}, nil
}

func decodeDistinctStats(dm *pb.Distinct) (reduce.Stats, error) {
	c := int(dm.GetCap())
	if c < 0 {
		return nil, fmt.Errorf("distinct values with cap %d", c)
	}
	vals := make([][]float64, len(dm.GetValues()))
	for j, v := range dm.GetValues() {
		vs := v.GetValues()
		if len(vs) > c+1 {
			return nil, fmt.Errorf("distinct values: column %d holds %d values, more than cap+1 = %d", j, len(vs), c+1)
		}
		for i := 1; i < len(vs); i++ {
			if !(vs[i] > vs[i-1]) {
				return nil, fmt.Errorf("distinct values: column %d is not strictly increasing", j)
			}
		}
		vals[j] = nonNil(vs)
	}
	return &reduce.Distinct{Cap: c, Values: vals}, nil
}

func encodeSampleStats(s *reduce.Sample) (*pb.Sample, error) {
	if s.K < 0 || s.K > math.MaxInt32 || s.D < 0 || s.D > math.MaxInt32 {
		return nil, fmt.Errorf("sample of %d rows of %d columns", s.K, s.D)
	}
	return &pb.Sample{K: int32(s.K), Keys: s.Keys, D: int32(s.D), X: s.X, Y: s.Y}, nil
}

func decodeSampleStats(sm *pb.Sample) (reduce.Stats, error) {
	kk, dd, n := int(sm.GetK()), int(sm.GetD()), len(sm.GetKeys())
	if kk < 0 || dd < 0 || n > kk || len(sm.GetY()) != n || len(sm.GetX()) != n*dd {
		return nil, fmt.Errorf("sample of at most %d rows of %d columns with %d keys, %d values and %d targets", kk, dd, n, len(sm.GetX()), len(sm.GetY()))
	}
	keys := sm.GetKeys()
	for i, u := range keys {
		if u != u || (i > 0 && u < keys[i-1]) {
			return nil, fmt.Errorf("sample keys are not in increasing order")
		}
	}
	return &reduce.Sample{K: kk, Keys: nonNil(keys), D: dd, X: nonNil(sm.GetX()), Y: nonNil(sm.GetY())}, nil
}
