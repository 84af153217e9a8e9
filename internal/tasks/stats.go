package tasks

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/reduce"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// Stat is one registered kind of shard statistic (the value a map task returns for one
// shard): how it becomes a message and back. The reduce statistics register in
// stats_reduce.go, those of a method's own tasks in the file of the tasks (vof.go).
type Stat struct {
	// Name is the statistic's field in the oneof kind of pb.Stats ("gram", "moments", ...).
	Name string
	// Types holds a value of each Go type the statistic encodes (a value type and its pointer
	// are two types); StatOf finds a statistic's entry by its type.
	Types []reduce.Stats
	// Encode returns the message of a statistic of one of Types: the message type of the Name
	// field of pb.Stats.
	Encode func(s reduce.Stats) (proto.Message, error)
	// Decode checks the shapes of a message of the Name field of pb.Stats and returns the
	// statistic it holds. It never panics, whatever the message holds.
	Decode func(m proto.Message) (reduce.Stats, error)
	// Example returns a small valid statistic, for tests.
	Example func() reduce.Stats
}

// newStat returns the entry of a statistic of Go type S held in messages of type M, from the
// typed encoder and decoder; Types is S alone.
func newStat[S reduce.Stats, M proto.Message](name string, enc func(S) (M, error), dec func(M) (reduce.Stats, error), example func() reduce.Stats) Stat {
	var zero S
	return Stat{
		Name:  name,
		Types: []reduce.Stats{zero},
		Encode: func(s reduce.Stats) (proto.Message, error) {
			v, ok := s.(S)
			if !ok {
				return nil, fmt.Errorf("%s statistic: a %T, want %T", name, s, zero)
			}
			m, err := enc(v)
			if err != nil {
				return nil, err
			}
			return m, nil
		},
		Decode: func(msg proto.Message) (reduce.Stats, error) {
			m, ok := msg.(M)
			if !ok {
				var want M
				return nil, fmt.Errorf("%s statistic: a %T message, want %T", name, msg, want)
			}
			return dec(m)
		},
		Example: example,
	}
}

var stats = newRegistry[Stat]("statistic")

// registerStat adds a statistic; it panics on an incomplete or duplicate entry, or a name
// that is not a field of the oneof kind of pb.Stats (a programming error found by any test
// of the package).
func registerStat(s Stat) {
	if s.Encode == nil || s.Decode == nil || s.Example == nil || len(s.Types) == 0 {
		panic(fmt.Sprintf("tasks: statistic %q needs Encode, Decode, Example and Types", s.Name))
	}
	if _, err := oneofField(&pb.Stats{}, "statistic", s.Name); err != nil {
		panic(fmt.Sprintf("tasks: %v", err))
	}
	types := make([]any, len(s.Types))
	for i, t := range s.Types {
		types[i] = t
	}
	stats.add(s.Name, types, s)
}

// StatNames returns the names of the registered statistics, sorted.
func StatNames() []string { return stats.names() }

// LookupStat returns the statistic of the given name.
func LookupStat(name string) (Stat, bool) { return stats.lookup(name) }

// StatOf returns the statistic whose Types include the dynamic type of s.
func StatOf(s reduce.Stats) (Stat, bool) { return stats.of(s) }

// WrapStats returns the pb.Stats whose oneof kind holds m in the field name.
func WrapStats(name string, m proto.Message) (*pb.Stats, error) {
	w := &pb.Stats{}
	if err := setOneof(w, "statistic", name, m); err != nil {
		return nil, err
	}
	return w, nil
}

// UnwrapStats returns the name and message of the field set in the oneof kind of m; "" and
// nil when none is (or m is nil).
func UnwrapStats(m *pb.Stats) (name string, msg proto.Message) {
	if m == nil {
		return "", nil
	}
	return getOneof(m)
}

// EncodeStats returns the message form of a shard statistic: its entry's message (StatOf,
// Stat.Encode) in the entry's field of the oneof of pb.Stats.
func EncodeStats(s reduce.Stats) (*pb.Stats, error) {
	st, ok := StatOf(s)
	if !ok {
		return nil, fmt.Errorf("encode stats: %T has no wire form", s)
	}
	m, err := st.Encode(s)
	if err != nil {
		return nil, fmt.Errorf("encode stats: %w", err)
	}
	w, err := WrapStats(st.Name, m)
	if err != nil {
		return nil, fmt.Errorf("encode stats: %w", err)
	}
	return w, nil
}

// DecodeStats checks the shapes of a statistic message and returns the statistic: the entry
// named by the field set in its oneof decodes it.
func DecodeStats(m *pb.Stats) (reduce.Stats, error) {
	name, msg := UnwrapStats(m)
	st, ok := LookupStat(name)
	if !ok {
		return nil, fmt.Errorf("decode stats: unknown kind %T", m.GetKind())
	}
	s, err := st.Decode(msg)
	if err != nil {
		return nil, fmt.Errorf("decode stats: %w", err)
	}
	return s, nil
}

// vectors returns the values of each vector of vs.
func vectors(vs [][]float64) []*pb.Vector {
	out := make([]*pb.Vector, len(vs))
	for i, v := range vs {
		out[i] = &pb.Vector{Values: v}
	}
	return out
}

// nonNil returns v, or an empty slice for nil (decoded statistics hold no nil slices where
// their merges append).
func nonNil(v []float64) []float64 {
	if v == nil {
		return []float64{}
	}
	return v
}
