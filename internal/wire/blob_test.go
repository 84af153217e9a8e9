package wire

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestHashFloats: the blob hash is the SHA-256 of the little-endian doubles, across the
// hasher's internal buffer boundary too.
func TestHashFloats(t *testing.T) {
	for _, n := range []int{0, 1, 1023, 1024, 1025, 3000} {
		x := vec(n, float64(n))
		if n > 0 {
			x[0] = -0.0 // the sign of zero is part of the bits
		}
		var buf bytes.Buffer
		if err := binary.Write(&buf, binary.LittleEndian, x); err != nil {
			t.Fatal(err)
		}
		if got, want := tasks.HashFloats(x), sha256.Sum256(buf.Bytes()); got != want {
			t.Errorf("%d values: hash %x, want %x", n, got, want)
		}
	}
	if tasks.HashFloats([]float64{0}) == tasks.HashFloats([]float64{negZero()}) {
		t.Error("+0 and -0 hash alike")
	}
}

func negZero() float64 {
	z := 0.0
	return -z
}

func hashOf(i int) [32]byte { return sha256.Sum256([]byte{byte(i)}) }

// TestBlobCache: the cache keeps blobs within its byte budget, evicting the least recently
// used (Get and Put both count as use), keeps nothing larger than the budget, and returns the
// held copy when an equal blob is put again.
func TestBlobCache(t *testing.T) {
	blob := func(n int) []float64 { return make([]float64, n) } // 8n bytes
	type step struct {
		op   string // "put" or "get"
		blob int    // hash index
		size int    // values, for put
	}
	tests := []struct {
		name      string
		budget    int64
		steps     []step
		held      []int // hash indices held at the end
		bytes     int64
		evictions uint64
	}{
		{"fits", 100, []step{{"put", 1, 4}, {"put", 2, 4}, {"put", 3, 4}}, []int{1, 2, 3}, 96, 0},
		{"oldest evicted", 80, []step{{"put", 1, 4}, {"put", 2, 4}, {"put", 3, 4}}, []int{2, 3}, 64, 1},
		{"get refreshes", 80, []step{{"put", 1, 4}, {"put", 2, 4}, {"get", 1, 0}, {"put", 3, 4}}, []int{1, 3}, 64, 1},
		{"put again refreshes", 80, []step{{"put", 1, 4}, {"put", 2, 4}, {"put", 1, 4}, {"put", 3, 4}}, []int{1, 3}, 64, 1},
		{"a large blob evicts several", 80, []step{{"put", 1, 2}, {"put", 2, 2}, {"put", 3, 3}, {"put", 4, 6}}, []int{3, 4}, 72, 2},
		{"exactly the budget", 64, []step{{"put", 1, 8}}, []int{1}, 64, 0},
		{"larger than the budget is not kept", 64, []step{{"put", 1, 4}, {"put", 2, 9}}, []int{1}, 32, 0},
		{"miss changes nothing", 64, []step{{"put", 1, 4}, {"get", 2, 0}}, []int{1}, 32, 0},
		{"negative budget keeps nothing", -1, []step{{"put", 1, 1}}, nil, 0, 0},
		{"default budget", 0, []step{{"put", 1, 1 << 20}, {"put", 2, 1 << 20}}, []int{1, 2}, 16 << 20, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewBlobCache(tc.budget)
			for _, s := range tc.steps {
				switch s.op {
				case "put":
					c.Put(hashOf(s.blob), blob(s.size))
				case "get":
					c.Get(hashOf(s.blob))
				}
			}
			var held []int
			for i := 0; i < 10; i++ {
				c.mu.Lock()
				_, ok := c.items[hashOf(i)] // without touching the order
				c.mu.Unlock()
				if ok {
					held = append(held, i)
				}
			}
			if !slices.Equal(held, tc.held) {
				t.Errorf("held %v, want %v", held, tc.held)
			}
			st := c.Stats()
			if st.Blobs != len(tc.held) || st.Bytes != tc.bytes || st.Evictions != tc.evictions {
				t.Errorf("stats %+v, want %d blobs, %d bytes, %d evictions", st, len(tc.held), tc.bytes, tc.evictions)
			}
			if tc.budget > 0 && st.Bytes > tc.budget {
				t.Errorf("%d bytes held over a budget of %d", st.Bytes, tc.budget)
			}
		})
	}

	// Putting an equal blob again returns the held copy.
	c := NewBlobCache(1 << 10)
	a, b := []float64{1, 2}, []float64{1, 2}
	if got := c.Put(hashOf(1), a); &got[0] != &a[0] {
		t.Error("the first put did not keep its blob")
	}
	if got := c.Put(hashOf(1), b); &got[0] != &a[0] {
		t.Error("a second put of the same hash did not return the held blob")
	}
	c.Clear()
	if st := c.Stats(); st.Blobs != 0 || st.Bytes != 0 {
		t.Errorf("after Clear: %+v", st)
	}
	if _, ok := c.Get(hashOf(1)); ok {
		t.Error("Get found a blob after Clear")
	}
}

// TestSlim: Slim strips the inputs of a kernel task and only them, names them by hash, and
// leaves the full task and other tasks alone.
func TestSlim(t *testing.T) {
	op, _, _ := kernelOp(t, 3, []float64{0.7, 1.3}, 0)
	n := op.N()
	full, err := EncodeTask(&tasks.KernelTask{Op: op, Kind: tasks.KernelMVM, K: 2, V: vec(2*3, 1), Idx: []int{1, 5, n - 1}})
	if err != nil {
		t.Fatal(err)
	}
	before := proto.Clone(full)
	want := tasks.HashFloats(op.X)
	if !bytes.Equal(full.GetKernel().GetOp().GetXSha256(), want[:]) {
		t.Fatalf("the encoder set x_sha256 %x, want %x", full.GetKernel().GetOp().GetXSha256(), want)
	}
	slim, blobs := Slim(full)
	if len(blobs) != 1 || blobs[0] != want {
		t.Fatalf("blobs %x, want [%x]", blobs, want)
	}
	expect := proto.Clone(full).(*pb.Task)
	expect.GetKernel().GetOp().X = nil
	if !proto.Equal(slim, expect) {
		t.Errorf("the slim task differs from the full one without its inputs:\n%v\n%v", slim, expect)
	}
	if !proto.Equal(full, before) {
		t.Error("Slim modified the full task")
	}
	// Every field of KernelTask and KernelOp but x is carried: set them all and compare.
	all := &pb.Task{Kind: &pb.Task_Kernel{Kernel: &pb.KernelTask{
		Op:   &pb.KernelOp{Kernel: "rbf", Lengthscales: []float64{1}, SignalVariance: 2, X: []float64{3}, Offsets: []int64{0, 1}, XSha256: want[:]},
		Kind: 2, K: 1, V: []float64{4}, A: []float64{5}, B: []float64{6}, Idx: []int32{0},
	}}}
	for _, msg := range []proto.Message{all.GetKernel(), all.GetKernel().GetOp()} {
		fields := msg.ProtoReflect().Descriptor().Fields()
		for i := 0; i < fields.Len(); i++ {
			if !msg.ProtoReflect().Has(fields.Get(i)) {
				t.Fatalf("test message leaves %s unset: set every field", fields.Get(i).FullName())
			}
		}
	}
	s, _ := Slim(all)
	expect = proto.Clone(all).(*pb.Task)
	expect.GetKernel().GetOp().X = nil
	if !proto.Equal(s, expect) {
		t.Errorf("Slim drops a field:\n%v\n%v", s, expect)
	}

	// Tasks without blobs are returned as they are.
	noHash := proto.Clone(full).(*pb.Task)
	noHash.GetKernel().GetOp().XSha256 = nil
	alreadySlim := proto.Clone(slim).(*pb.Task)
	moments, _ := EncodeTask(shard.MomentsTask{})
	for name, task := range map[string]*pb.Task{"moments": moments, "kernel op without hash": noHash, "slim": alreadySlim, "empty": {}} {
		got, blobs := Slim(task)
		if got != task || blobs != nil {
			t.Errorf("%s: Slim returned another task or blobs %x", name, blobs)
		}
	}
}

// TestDecodeSlim: a slim kernel task decodes only once its blob is held (from a full task of
// any op over the same inputs), to the same op as its full form and to the same bits; without
// the blob it fails with a *MissingBlobError naming the hash, unless its op is still cached.
func TestDecodeSlim(t *testing.T) {
	ctx := context.Background()
	opA, refs, tabs := kernelOp(t, 3, []float64{0.7, 1.3}, 0)
	opB := &tasks.KernelOp{Kernel: opA.Kernel, X: opA.X, Offsets: opA.Offsets}
	opB.Kernel.Lengthscales = []float64{0.9, 1.1}
	opC := &tasks.KernelOp{Kernel: opA.Kernel, X: opA.X, Offsets: opA.Offsets}
	opC.Kernel.SignalVariance = 0.4
	n := opA.N()
	h := tasks.HashFloats(opA.X)
	enc := func(op *tasks.KernelOp, seed float64) (full, slim *pb.Task) {
		t.Helper()
		m, err := EncodeTask(&tasks.KernelTask{Op: op, Kind: tasks.KernelMVM, K: 2, V: vec(2*n, seed)})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := Slim(m)
		// Through bytes, as on the network.
		b, err := proto.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		s = &pb.Task{}
		if err := proto.Unmarshal(b, s); err != nil {
			t.Fatal(err)
		}
		return m, s
	}
	dec := NewDecoder()
	decode := func(m *pb.Task) (*tasks.KernelTask, error) {
		task, err := dec.DecodeTask(m)
		if err != nil {
			return nil, err
		}
		return task.(*tasks.KernelTask), nil
	}
	checkMissing := func(what string, err error) {
		t.Helper()
		var mb *MissingBlobError
		if !errors.Is(err, ErrMissingBlob) || !errors.As(err, &mb) || mb.Hash != h {
			t.Fatalf("%s: error %v, want a missing blob %x", what, err, h)
		}
		if !strings.HasPrefix(err.Error(), "decode task: missing blob sha256:"+fmt.Sprintf("%x", h)) {
			t.Errorf("%s: message %q", what, err)
		}
	}

	fullA, slimA := enc(opA, 1)
	_, err := decode(slimA)
	checkMissing("slim before full", err)
	if st := dec.Blobs().Stats(); st.Misses != 1 || st.Hits != 0 || st.Blobs != 0 {
		t.Errorf("stats after a miss: %+v", st)
	}
	if len(dec.ops.order) != 0 {
		t.Error("a failed slim decode cached an op")
	}
	a, err := decode(fullA)
	if err != nil {
		t.Fatal(err)
	}
	if st := dec.Blobs().Stats(); st.Blobs != 1 || st.Bytes != int64(8*len(opA.X)) {
		t.Errorf("stats after a full decode: %+v", st)
	}
	if held, _ := dec.Blobs().Get(h); &held[0] != &a.Op.X[0] {
		t.Error("the op and the blob cache hold different copies of the inputs")
	}
	sa, err := decode(slimA)
	if err != nil {
		t.Fatal(err)
	}
	if sa.Op != a.Op {
		t.Error("the slim task decoded to another op than its full form")
	}
	for i, ref := range refs {
		want, err := a.Map(ctx, ref, tabs[i])
		if err != nil {
			t.Fatal(err)
		}
		got, err := sa.Map(ctx, ref, tabs[i])
		if err != nil {
			t.Fatal(err)
		}
		local, err := (&tasks.KernelTask{Op: opA, Kind: tasks.KernelMVM, K: 2, V: vec(2*n, 1)}).Map(ctx, ref, tabs[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(statsBytes(t, got), statsBytes(t, want)) || !bytes.Equal(statsBytes(t, got), statsBytes(t, local)) {
			t.Fatalf("shard %d: the slim task computes other bits", i)
		}
	}

	// Another op over the same inputs needs no full task: it takes the held blob.
	_, slimB := enc(opB, 2)
	b, err := decode(slimB)
	if err != nil {
		t.Fatal(err)
	}
	if b.Op == a.Op || &b.Op.X[0] != &a.Op.X[0] || b.Op.Kernel.Lengthscales[0] != 0.9 {
		t.Error("op B is not a new op over the held inputs")
	}
	if st := dec.Blobs().Stats(); st.Hits != 2 || st.Misses != 1 {
		t.Errorf("stats after two slim decodes: %+v", st)
	}

	// The blob is gone (evicted, or a restart of the cache): cached ops still decode from
	// their slim form, a new op does not.
	dec.Blobs().Clear()
	if got, err := decode(slimB); err != nil || got.Op != b.Op {
		t.Errorf("slim task of a cached op after the blob went: %v", err)
	}
	_, slimC := enc(opC, 3)
	_, err = decode(slimC)
	checkMissing("slim of a new op after the blob went", err)
	// A full task of any op brings the blob back.
	fullC, _ := enc(opC, 3)
	if _, err := decode(fullC); err != nil {
		t.Fatal(err)
	}
	if _, err := decode(slimC); err != nil {
		t.Errorf("slim task after its full form: %v", err)
	}

	// A fresh decoder (a restarted worker) knows nothing.
	dec = NewDecoder()
	_, err = decode(slimA)
	checkMissing("slim on a fresh decoder", err)

	// A full op without a hash (an older sender) is hashed by the decoder and still shares
	// its op and blob with the slim form.
	noHash := proto.Clone(fullA).(*pb.Task)
	noHash.GetKernel().GetOp().XSha256 = nil
	nh, err := decode(noHash)
	if err != nil {
		t.Fatal(err)
	}
	if sa, err := decode(slimA); err != nil || sa.Op != nh.Op {
		t.Errorf("slim task after a full one without hash: %v", err)
	}

	// Decoders sharing a cache share blobs.
	shared := NewBlobCache(0)
	d1, d2 := NewDecoderWithBlobs(shared), NewDecoderWithBlobs(shared)
	if _, err := d1.DecodeTask(fullA); err != nil {
		t.Fatal(err)
	}
	if _, err := d2.DecodeTask(slimA); err != nil {
		t.Errorf("slim task on a decoder sharing the blob cache: %v", err)
	}
}

// TestMissingBlobStatus: the worker's status for a missing blob is FAILED_PRECONDITION with a
// detail naming the hash, and MissingBlobOf recognizes it (wrapped too, or by its message
// alone) but nothing else.
func TestMissingBlobStatus(t *testing.T) {
	h := tasks.HashFloats([]float64{1, 2, 3})
	decErr := fmt.Errorf("decode task: %w", &MissingBlobError{Hash: h})
	stErr := MissingBlobStatus(decErr)
	st, ok := status.FromError(stErr)
	if !ok || st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), fmt.Sprintf("missing blob sha256:%x", h)) {
		t.Fatalf("status %v", stErr)
	}
	var detail *pb.MissingBlob
	for _, d := range st.Details() {
		if m, ok := d.(*pb.MissingBlob); ok {
			detail = m
		}
	}
	if detail == nil || !bytes.Equal(detail.GetSha256(), h[:]) {
		t.Errorf("details %v", st.Details())
	}
	if MissingBlobStatus(errors.New("decode task: bad")) != nil {
		t.Error("a status for an error without a missing blob")
	}

	msgOnly := status.Error(codes.FailedPrecondition, "run task: "+decErr.Error())
	other := tasks.HashFloats([]float64{4})
	tests := []struct {
		name string
		err  error
		ok   bool
		hash [32]byte
	}{
		{"status", stErr, true, h},
		{"wrapped", fmt.Errorf("worker w1 at x:1: %w", stErr), true, h},
		{"message only", msgOnly, true, h},
		{"detail wins over message", withDetail(t, "missing blob sha256:"+fmt.Sprintf("%x", h), other), true, other},
		{"other code", status.Error(codes.InvalidArgument, "run task: "+decErr.Error()), false, [32]byte{}},
		{"bad data", status.Error(codes.FailedPrecondition, "mem: line 3: not a number"), false, [32]byte{}},
		{"short hash in message", status.Error(codes.FailedPrecondition, "missing blob sha256:abcd"), false, [32]byte{}},
		{"not hex", status.Error(codes.FailedPrecondition, "missing blob sha256:"+strings.Repeat("z", 64)), false, [32]byte{}},
		{"not a status", decErr, false, [32]byte{}},
		{"nil", nil, false, [32]byte{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := MissingBlobOf(tc.err)
			if ok != tc.ok || got != tc.hash {
				t.Errorf("MissingBlobOf = %x, %v; want %x, %v", got, ok, tc.hash, tc.ok)
			}
		})
	}
}

func withDetail(t *testing.T, msg string, h [32]byte) error {
	t.Helper()
	st, err := status.New(codes.FailedPrecondition, msg).WithDetails(&pb.MissingBlob{Sha256: h[:]})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}
