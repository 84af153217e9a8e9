package tasks_test

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// statsBits returns the deterministic encoding of a statistic: equal bytes mean equal bits.
func statsBits(t *testing.T, s reduce.Stats) []byte {
	t.Helper()
	m, err := tasks.EncodeStats(s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRegistryRoundTrip walks the registry: every kind's Example survives wire encode ->
// bytes -> decode -> encode with an equal message in the kind's field of pb.Task, its kind is
// found from the task and from the message, and the decoded task computes the same bits on
// SmallShard as the original (which fits it: its input dimensions are the shard's).
func TestRegistryRoundTrip(t *testing.T) {
	for _, name := range tasks.Kinds() {
		t.Run(name, func(t *testing.T) { roundTrip(t, name) })
	}
}

// roundTrip checks one kind: its Example survives wire encode -> bytes -> decode -> encode
// with an equal message in the kind's field of pb.Task, its kind is found from the task and
// from the message, and the decoded task computes the same bits on SmallShard.
func roundTrip(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	ref, tab := tasks.SmallShard()
	k, ok := tasks.Lookup(name)
	if !ok || k.Name != name {
		t.Fatalf("Lookup(%q) = %q, %v", name, k.Name, ok)
	}
	task := k.Example()
	if of, ok := tasks.Of(task); !ok || of.Name != name {
		t.Fatalf("Of(%T) = %q, %v; want %q", task, of.Name, ok, name)
	}
	if k.Inputs != nil {
		for _, d := range k.Inputs(task) {
			if d != tab.D {
				t.Fatalf("the example is for %d inputs, the small shard has %d", d, tab.D)
			}
		}
	}
	m, err := wire.EncodeTask(task)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tasks.Unwrap(m); got != name {
		t.Fatalf("encoded into field %q of pb.Task, want %q", got, name)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var sent pb.Task
	if err := proto.Unmarshal(b, &sent); err != nil {
		t.Fatal(err)
	}
	back, err := wire.NewDecoder().DecodeTask(&sent)
	if err != nil {
		t.Fatal(err)
	}
	again, err := wire.EncodeTask(back)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(m, again) {
		t.Fatalf("encode -> decode -> encode changed the message:\n%v\n%v", m, again)
	}
	if k.Slim != nil {
		// A slim form, decoded where the full one was decoded before, is the same task.
		dec := wire.NewDecoder()
		if _, err := dec.DecodeTask(m); err != nil {
			t.Fatal(err)
		}
		slim, _ := wire.Slim(m)
		viaSlim, err := dec.DecodeTask(slim)
		if err != nil {
			t.Fatalf("slim form: %v", err)
		}
		if again, err := wire.EncodeTask(viaSlim); err != nil || !proto.Equal(m, again) {
			t.Fatalf("the slim form decodes to another task (%v)", err)
		}
	}
	want, err := task.Map(ctx, ref, tab)
	if err != nil {
		t.Fatal(err)
	}
	got, err := back.Map(ctx, ref, tab)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(statsBits(t, got), statsBits(t, want)) {
		t.Fatal("the decoded task computes other bits than the original")
	}
}

// TestKindsAreTheOneof: the registered kinds are exactly the fields of the oneof kind of
// pb.Task, sorted, and a task message with no kind set, or a task of no kind, finds none.
func TestKindsAreTheOneof(t *testing.T) {
	var fields []string
	oneof := (&pb.Task{}).ProtoReflect().Descriptor().Oneofs().ByName("kind")
	for i := 0; i < oneof.Fields().Len(); i++ {
		fields = append(fields, string(oneof.Fields().Get(i).Name()))
	}
	slices.Sort(fields)
	if got := tasks.Kinds(); !slices.Equal(got, fields) {
		t.Errorf("Kinds() = %v, want the oneof's fields %v", got, fields)
	}
	if !slices.IsSorted(tasks.Kinds()) {
		t.Error("Kinds() is not sorted")
	}
	if _, ok := tasks.Lookup("nope"); ok {
		t.Error(`Lookup("nope") found a kind`)
	}
	if name, m := tasks.Unwrap(&pb.Task{}); name != "" || m != nil {
		t.Errorf("Unwrap of an empty task = %q, %v", name, m)
	}
	if name, m := tasks.Unwrap(nil); name != "" || m != nil {
		t.Errorf("Unwrap(nil) = %q, %v", name, m)
	}
	if _, ok := tasks.Of(nil); ok {
		t.Error("Of(nil) found a kind")
	}
	type other struct{ shard.MomentsTask }
	if _, ok := tasks.Of(other{}); ok {
		t.Error("Of found a kind for an unregistered type")
	}
}

// TestWrap: Wrap puts a message in the named field and refuses unknown names and messages
// of another field's type.
func TestWrap(t *testing.T) {
	tests := []struct {
		name string
		kind string
		m    proto.Message
		ok   bool
	}{
		{"rows", "rows", &pb.RowsTask{}, true},
		{"sample", "sample", &pb.SampleTask{K: 3}, true},
		{"unknown kind", "nope", &pb.RowsTask{}, false},
		{"wrong message", "gram", &pb.RowsTask{}, false},
		{"no message", "rows", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tasks.Wrap(tc.kind, tc.m)
			if (err == nil) != tc.ok {
				t.Fatalf("Wrap(%q, %T): error %v, want ok=%v", tc.kind, tc.m, err, tc.ok)
			}
			if !tc.ok {
				return
			}
			name, m := tasks.Unwrap(got)
			if name != tc.kind || !proto.Equal(m, tc.m) {
				t.Errorf("Unwrap(Wrap) = %q, %v", name, m)
			}
		})
	}
}
