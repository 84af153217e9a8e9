package tasks

import (
	"fmt"
	"math"
	"reflect"
	"sort"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/shard"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// Kind is one registered kind of map task: how its tasks become messages and back.
type Kind struct {
	// Name is the kind's field in the oneof kind of pb.Task ("gram", "kernel", ...).
	Name string
	// Types holds a value of each Go type whose tasks the kind encodes (a value type and its
	// pointer are two types); Of finds a task's kind by its type.
	Types []engine.Task
	// Encode returns the message of a task of one of Types: the message type of the Name
	// field of pb.Task.
	Encode func(t engine.Task) (proto.Message, error)
	// Decode returns the task a message of the kind describes, after checking its shapes. It
	// builds values that many tasks share (feature maps, kernel ops) through env.
	Decode func(env Env, m proto.Message) (engine.Task, error)
	// Inputs returns the input dimensions a decoded task assumes of a shard; each must be the
	// shard's. Nil means the kind's tasks fit any shard.
	Inputs func(t engine.Task) []int
	// Slim, when set, returns the form of a message that names its broadcast blobs by hash
	// instead of carrying them, and the hashes; a message without blobs is returned as it is,
	// with no hashes. The slim message shares every other field with m; m is not modified.
	Slim func(m proto.Message) (slim proto.Message, blobs [][32]byte)
	// Example returns a small valid task that runs on SmallShard, for tests.
	Example func() engine.Task
}

// registry holds the entries of one registry (task kinds, statistics) by name and by the Go
// types they encode. It is filled by the init functions of the package's files and only read
// afterwards.
type registry[V any] struct {
	what   string // "kind", "statistic": for the panics of add
	byName map[string]V
	byType map[reflect.Type]string
}

func newRegistry[V any](what string) *registry[V] {
	return &registry[V]{what: what, byName: map[string]V{}, byType: map[reflect.Type]string{}}
}

// add registers v under name and the Go types of values; it panics on a duplicate name or
// type (a programming error found by any test of the package).
func (r *registry[V]) add(name string, values []any, v V) {
	if _, dup := r.byName[name]; dup {
		panic(fmt.Sprintf("tasks: %s %q registered twice", r.what, name))
	}
	for _, x := range values {
		typ := reflect.TypeOf(x)
		if other, dup := r.byType[typ]; dup {
			panic(fmt.Sprintf("tasks: %v is a type of %ss %q and %q", typ, r.what, other, name))
		}
		r.byType[typ] = name
	}
	r.byName[name] = v
}

// names returns the registered names, sorted.
func (r *registry[V]) names() []string {
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// lookup returns the entry of the given name.
func (r *registry[V]) lookup(name string) (V, bool) {
	v, ok := r.byName[name]
	return v, ok
}

// of returns the entry registered for the dynamic type of x.
func (r *registry[V]) of(x any) (V, bool) {
	name, ok := r.byType[reflect.TypeOf(x)]
	if !ok {
		var zero V
		return zero, false
	}
	return r.lookup(name)
}

var kinds = newRegistry[Kind]("kind")

// register adds a kind; it panics on an incomplete or duplicate kind, or a name that is not a
// field of the oneof kind of pb.Task (a programming error found by any test of the package).
func register(k Kind) {
	if k.Encode == nil || k.Decode == nil || k.Example == nil || len(k.Types) == 0 {
		panic(fmt.Sprintf("tasks: kind %q needs Encode, Decode, Example and Types", k.Name))
	}
	if _, err := kindField(k.Name); err != nil {
		panic(fmt.Sprintf("tasks: %v", err))
	}
	types := make([]any, len(k.Types))
	for i, t := range k.Types {
		types[i] = t
	}
	kinds.add(k.Name, types, k)
}

// Kinds returns the names of the registered kinds, sorted.
func Kinds() []string { return kinds.names() }

// Lookup returns the kind of the given name.
func Lookup(name string) (Kind, bool) { return kinds.lookup(name) }

// Of returns the kind whose Types include the dynamic type of t.
func Of(t engine.Task) (Kind, bool) { return kinds.of(t) }

// oneofField returns the field called name of the oneof kind of w's message type; what names
// the registry's entries in the error ("task kind", "statistic").
func oneofField(w proto.Message, what, name string) (protoreflect.FieldDescriptor, error) {
	d := w.ProtoReflect().Descriptor()
	fd := d.Oneofs().ByName("kind").Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		return nil, fmt.Errorf("%s %q is not a field of the oneof kind of %s", what, name, d.FullName())
	}
	return fd, nil
}

// setOneof puts m in the field called name of the oneof kind of w, failing when there is no
// such field, m is nil or m is not that field's message type.
func setOneof(w proto.Message, what, name string, m proto.Message) error {
	fd, err := oneofField(w, what, name)
	if err != nil {
		return err
	}
	if m == nil {
		return fmt.Errorf("%s %q: no message", what, name)
	}
	if got, want := m.ProtoReflect().Descriptor().FullName(), fd.Message().FullName(); got != want {
		return fmt.Errorf("%s %q holds a %s, not a %s", what, name, want, got)
	}
	w.ProtoReflect().Set(fd, protoreflect.ValueOfMessage(m.ProtoReflect()))
	return nil
}

// getOneof returns the name and message of the field set in the oneof kind of w; "" and nil
// when none is (or w is a nil message).
func getOneof(w proto.Message) (name string, m proto.Message) {
	r := w.ProtoReflect()
	if !r.IsValid() {
		return "", nil
	}
	fd := r.WhichOneof(r.Descriptor().Oneofs().ByName("kind"))
	if fd == nil {
		return "", nil
	}
	return string(fd.Name()), r.Get(fd).Message().Interface()
}

// kindField returns the field of the oneof kind of pb.Task named name.
func kindField(name string) (protoreflect.FieldDescriptor, error) {
	return oneofField(&pb.Task{}, "task kind", name)
}

// Wrap returns the pb.Task whose oneof kind holds m in the field name.
func Wrap(name string, m proto.Message) (*pb.Task, error) {
	t := &pb.Task{}
	if err := setOneof(t, "task kind", name, m); err != nil {
		return nil, err
	}
	return t, nil
}

// Unwrap returns the name and message of the field set in the oneof kind of t; "" and nil
// when none is (or t is nil).
func Unwrap(t *pb.Task) (name string, m proto.Message) {
	if t == nil {
		return "", nil
	}
	return getOneof(t)
}

// Cache names one of a decoder's caches of values built from messages (see Env).
type Cache int

const (
	// MapCache holds feature maps, which a job's many Gram tasks share (a Gauss-Legendre grid
	// costs O(m^2) per dimension to compute).
	MapCache Cache = iota
	// OpCache holds kernel ops, one per hyperparameter value; each may keep GiBs of kernel
	// blocks, so the decoder keeps only a few.
	OpCache
)

// Env is what a kind's Decode may use of the decoder that calls it (wire.Decoder): caches of
// values built from messages, shared by the tasks it decodes, and the broadcast blobs it
// holds. Implementations are safe for concurrent use.
type Env interface {
	// Shared returns the value build makes of m, shared with earlier calls whose message had
	// the same type and deterministic encoding in cache c.
	Shared(c Cache, m proto.Message, build func() (any, error)) (any, error)
	// Blob returns the held blob of hash h, marking it most recently used. When it is not
	// held, the error is the decoder's missing-blob error, which a kind returns as it is (the
	// worker answers it so that the coordinator resends the task in full).
	Blob(h [32]byte) ([]float64, error)
	// KeepBlob holds blob x, whose hash h the caller has checked, as the most recently used,
	// and returns the held copy (an equal blob already held, else x). The caller must not
	// modify x afterwards.
	KeepBlob(h [32]byte, x []float64) []float64
	// UsedBlob counts a task that named blob h by hash and was decoded (a blob hit), and
	// marks the blob most recently used.
	UsedBlob(h [32]byte)
}

// smallRows is the row count of SmallShard.
const smallRows = 40

// SmallShard returns a small shard (40 rows of 2 inputs, shard 0 of a job with one shard) on
// which every kind's Example runs.
func SmallShard() (shard.Ref, *shard.Table) {
	t := &shard.Table{Source: "small", D: 2}
	for i := 0; i < smallRows; i++ {
		a, b := math.Sin(float64(i)*0.7), math.Cos(float64(i)*0.3)
		t.X = append(t.X, a, b)
		t.Y = append(t.Y, a*b+0.1*math.Sin(float64(i)*7))
	}
	return shard.Ref{Index: 0, Source: "small", Rows: smallRows}, t
}

// smallTransform is a standardization of SmallShard's two inputs, for the examples.
func smallTransform() shard.Transform {
	return shard.Transform{XMean: []float64{0.1, -0.2}, XScale: []float64{0.8, 0.6}, YMean: 0.05, YScale: 0.4}
}

// message returns m as the message type M of kind, failing when it is another type.
func message[M proto.Message](kind string, m proto.Message) (M, error) {
	v, ok := m.(M)
	if !ok {
		var want M
		return want, fmt.Errorf("%s task: a %T message, want %T", kind, m, want)
	}
	return v, nil
}
