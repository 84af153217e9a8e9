package tasks_test

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/tasks"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// statsOneof returns the fields of the oneof kind of pb.Stats.
func statsOneof() []protoreflect.FieldDescriptor {
	oneof := (&pb.Stats{}).ProtoReflect().Descriptor().Oneofs().ByName("kind")
	var fields []protoreflect.FieldDescriptor
	for i := 0; i < oneof.Fields().Len(); i++ {
		fields = append(fields, oneof.Fields().Get(i))
	}
	return fields
}

// deterministic returns the deterministic encoding of m: equal bytes mean equal bits.
func deterministic(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStatsAreTheOneof: the registered statistics are exactly the fields of the oneof kind of
// pb.Stats, sorted; each finds its entry by name and by the type of its Example; a message
// with no kind set, or a statistic of no registered type, finds none.
func TestStatsAreTheOneof(t *testing.T) {
	var fields []string
	for _, fd := range statsOneof() {
		fields = append(fields, string(fd.Name()))
	}
	slices.Sort(fields)
	names := tasks.StatNames()
	if !slices.Equal(names, fields) {
		t.Errorf("StatNames() = %v, want the oneof's fields %v", names, fields)
	}
	if !slices.IsSorted(names) {
		t.Error("StatNames() is not sorted")
	}
	for _, name := range names {
		st, ok := tasks.LookupStat(name)
		if !ok || st.Name != name {
			t.Errorf("LookupStat(%q) = %q, %v", name, st.Name, ok)
			continue
		}
		ex := st.Example()
		if of, ok := tasks.StatOf(ex); !ok || of.Name != name {
			t.Errorf("StatOf(%T) = %q, %v; want %q", ex, of.Name, ok, name)
		}
	}
	if _, ok := tasks.LookupStat("nope"); ok {
		t.Error(`LookupStat("nope") found a statistic`)
	}
	if name, m := tasks.UnwrapStats(&pb.Stats{}); name != "" || m != nil {
		t.Errorf("UnwrapStats of an empty message = %q, %v", name, m)
	}
	if name, m := tasks.UnwrapStats(nil); name != "" || m != nil {
		t.Errorf("UnwrapStats(nil) = %q, %v", name, m)
	}
	if _, ok := tasks.StatOf(nil); ok {
		t.Error("StatOf(nil) found a statistic")
	}
	type other struct{ *reduce.Gram }
	if _, ok := tasks.StatOf(other{}); ok {
		t.Error("StatOf found a statistic for an unregistered type")
	}
	if _, err := tasks.EncodeStats(other{}); err == nil {
		t.Error("EncodeStats encoded an unregistered type")
	}
}

// TestStatsRegistryRoundTrip walks the statistics registry: every Example survives encode ->
// bytes -> decode -> encode with an equal message and equal bits in its own field of
// pb.Stats, and decodes to a statistic equal to the Example.
func TestStatsRegistryRoundTrip(t *testing.T) {
	for _, name := range tasks.StatNames() {
		t.Run(name, func(t *testing.T) {
			st, _ := tasks.LookupStat(name)
			ex := st.Example()
			m, err := tasks.EncodeStats(ex)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := tasks.UnwrapStats(m); got != name {
				t.Fatalf("encoded into field %q of pb.Stats, want %q", got, name)
			}
			b, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			var sent pb.Stats
			if err := proto.Unmarshal(b, &sent); err != nil {
				t.Fatal(err)
			}
			back, err := tasks.DecodeStats(&sent)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, ex) {
				t.Errorf("decoded %+v, want %+v", back, ex)
			}
			again, err := tasks.EncodeStats(back)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(m, again) {
				t.Errorf("encode -> decode -> encode changed the message:\n%v\n%v", m, again)
			}
			if !bytes.Equal(deterministic(t, m), deterministic(t, again)) {
				t.Error("encode -> decode -> encode changed the bits")
			}
		})
	}
}

// TestSmallStatsRoundTrip: empty and edge-case Distinct and Sample statistics survive a round trip.
func TestSmallStatsRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		s    reduce.Stats
	}{
		{"distinct empty columns", reduce.NewDistinct(3, 4)},
		{"distinct no columns", reduce.NewDistinct(0, 4)},
		{"distinct full", &reduce.Distinct{Cap: 2, Values: [][]float64{{-1, 0, 3}, {5}}}},
		{"sample empty", reduce.NewSample(5, 2)},
		{"sample no inputs", &reduce.Sample{K: 3, Keys: []float64{0.1, 0.1}, D: 0, X: []float64{}, Y: []float64{1, 2}}},
		{"sample rows", &reduce.Sample{K: 2, Keys: []float64{0.1, 0.4}, D: 2, X: []float64{1, 2, 3, 4}, Y: []float64{5, 6}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tasks.EncodeStats(tc.s)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tasks.DecodeStats(m)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.s) {
				t.Fatalf("got %+v, want %+v", got, tc.s)
			}
		})
	}
}

// TestEncodeStatsRejects: statistics whose sizes do not fit their message are refused.
func TestEncodeStatsRejects(t *testing.T) {
	for _, s := range []reduce.Stats{
		&reduce.Distinct{Cap: -1},
		&reduce.Distinct{Cap: 1 << 40},
		&reduce.Sample{K: -1},
		&reduce.Sample{K: 2, D: 1 << 40},
	} {
		if _, err := tasks.EncodeStats(s); err == nil {
			t.Errorf("EncodeStats(%+v) accepted", s)
		}
	}
}

// malformedStats are statistic messages that DecodeStats must refuse.
func malformedStats() []*pb.Stats {
	return []*pb.Stats{
		{},
		{Kind: &pb.Stats_Gram{}},
		{Kind: &pb.Stats_Gram{Gram: &pb.Gram{S: 2, G: []float64{1, 2, 3}, B: []float64{1, 2}}}},
		{Kind: &pb.Stats_Moments{Moments: &pb.Moments{Mean: []float64{1}, M2: []float64{1}}}},
		{Kind: &pb.Stats_Rows{Rows: &pb.Rows{D: 2, X: []float64{1, 2, 3}, Y: []float64{1}}}},
		{Kind: &pb.Stats_Distinct{Distinct: &pb.Distinct{Cap: -1}}},
		{Kind: &pb.Stats_Distinct{Distinct: &pb.Distinct{Cap: 1, Values: []*pb.Vector{{Values: []float64{1, 2, 3}}}}}},
		{Kind: &pb.Stats_Distinct{Distinct: &pb.Distinct{Cap: 3, Values: []*pb.Vector{{Values: []float64{2, 1}}}}}},
		{Kind: &pb.Stats_Sample{Sample: &pb.Sample{K: -1}}},
		{Kind: &pb.Stats_Sample{Sample: &pb.Sample{K: 1, D: 1, Keys: []float64{1, 2}, X: []float64{1, 2}, Y: []float64{1, 2}}}},
		{Kind: &pb.Stats_Sample{Sample: &pb.Sample{K: 3, D: 2, Keys: []float64{1}, X: []float64{1}, Y: []float64{1}}}},
		{Kind: &pb.Stats_Sample{Sample: &pb.Sample{K: 3, D: 1, Keys: []float64{1}, X: []float64{1}, Y: nil}}},
		{Kind: &pb.Stats_Sample{Sample: &pb.Sample{K: 3, D: 1, Keys: []float64{2, 1}, X: []float64{1, 2}, Y: []float64{1, 2}}}},
		{Kind: &pb.Stats_VofKuf{}},
		{Kind: &pb.Stats_VofKuf{VofKuf: &pb.VOFKufStats{M: 2, Ky: []float64{1, 2}, Kk: []float64{1, 2, 3}}}},
		{Kind: &pb.Stats_VofKuf{VofKuf: &pb.VOFKufStats{M: 1, NShape: 2, Ky: []float64{1}, Kk: []float64{1}, Dky: []float64{1}}}},
		{Kind: &pb.Stats_VofKuf{VofKuf: &pb.VOFKufStats{M: 1, N: -1, Ky: []float64{1}, Kk: []float64{1}}}},
		{Kind: &pb.Stats_VofTrig{}},
		{Kind: &pb.Stats_VofTrig{VofTrig: &pb.VOFTrigStats{T: 1, D: 1, B: make([]*pb.Vector, 3), P: make([]*pb.Vector, 4)}}},
		{Kind: &pb.Stats_VofTrig{VofTrig: &pb.VOFTrigStats{T: 1, D: 1, B: make([]*pb.Vector, 4), P: make([]*pb.Vector, 4)}}},
		{Kind: &pb.Stats_VofTrig{VofTrig: &pb.VOFTrigStats{T: 1, D: 1, B: ones(4, 1), P: ones(4, 1), Xb: ones(4, 1), Xp: ones(3, 1)}}},
		{Kind: &pb.Stats_VofTrig{VofTrig: &pb.VOFTrigStats{T: 1, D: 1, B: ones(4, 1), P: ones(4, 1), Xb: ones(4, 1), Xp: append(ones(3, 1), ones(1, 2)...)}}},
	}
}

// ones returns n vectors of k ones.
func ones(n, k int) []*pb.Vector {
	out := make([]*pb.Vector, n)
	for i := range out {
		v := make([]float64, k)
		for j := range v {
			v[j] = 1
		}
		out[i] = &pb.Vector{Values: v}
	}
	return out
}

// TestDecodeStatsRejectsMalformed: malformed statistic messages give errors, never panics;
// an empty message in each field of the oneof decodes or fails, without panicking.
func TestDecodeStatsRejectsMalformed(t *testing.T) {
	for i, m := range malformedStats() {
		if s, err := tasks.DecodeStats(m); err == nil {
			t.Errorf("malformed stats %d (%v) accepted as %+v", i, m, s)
		}
	}
	for _, fd := range statsOneof() {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(fd.Message().FullName())
		if err != nil {
			t.Fatal(err)
		}
		m, err := tasks.WrapStats(string(fd.Name()), mt.New().Interface())
		if err != nil {
			t.Fatal(err)
		}
		if s, err := tasks.DecodeStats(m); err == nil {
			if _, err := tasks.EncodeStats(s); err != nil {
				t.Errorf("an empty %s decoded to %+v, which does not encode: %v", fd.Name(), s, err)
			}
		}
	}
}

// TestWrapStats: WrapStats puts a message in the named field and refuses unknown names and
// messages of another field's type.
func TestWrapStats(t *testing.T) {
	tests := []struct {
		name string
		stat string
		m    proto.Message
		ok   bool
	}{
		{"rows", "rows", &pb.Rows{D: 1}, true},
		{"vof_trig", "vof_trig", &pb.VOFTrigStats{T: 3}, true},
		{"unknown statistic", "nope", &pb.Rows{}, false},
		{"wrong message", "gram", &pb.Rows{}, false},
		{"no message", "rows", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tasks.WrapStats(tc.stat, tc.m)
			if (err == nil) != tc.ok {
				t.Fatalf("WrapStats(%q, %T): error %v, want ok=%v", tc.stat, tc.m, err, tc.ok)
			}
			if !tc.ok {
				return
			}
			name, m := tasks.UnwrapStats(got)
			if name != tc.stat || !proto.Equal(m, tc.m) {
				t.Errorf("UnwrapStats(WrapStats) = %q, %v", name, m)
			}
		})
	}
}

// FuzzDecodeStats: no statistic message, however malformed, panics the decoder, and one that
// decodes encodes again to a message that decodes to the same bits. Seeds: every registered
// statistic's Example and the malformed messages.
func FuzzDecodeStats(f *testing.F) {
	for _, name := range tasks.StatNames() {
		st, _ := tasks.LookupStat(name)
		m, err := tasks.EncodeStats(st.Example())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(deterministic(f, m))
	}
	for _, m := range malformedStats() {
		f.Add(deterministic(f, m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m pb.Stats
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		s, err := tasks.DecodeStats(&m)
		if err != nil {
			return
		}
		again, err := tasks.EncodeStats(s)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", s, err)
		}
		s2, err := tasks.DecodeStats(again)
		if err != nil {
			t.Fatalf("the re-encoded statistic does not decode: %v", err)
		}
		third, err := tasks.EncodeStats(s2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(deterministic(t, again), deterministic(t, third)) {
			t.Error("decode -> encode is not stable")
		}
	})
}
