package wire

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/kernel"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// kernelOp returns the kernel op of table()'s inputs cut into k shards, with the shards.
func kernelOp(t *testing.T, k int, ls []float64, cacheBytes int64) (*tasks.KernelOp, []shard.Ref, []*shard.Table) {
	t.Helper()
	tab := table()
	refs, tabs := shard.PartitionCount(tab, k)
	op := &tasks.KernelOp{
		Kernel:     kernel.Kernel{Family: kernel.Matern32, Lengthscales: ls, SignalVariance: 1.7},
		X:          tab.X,
		Offsets:    []int{0},
		CacheBytes: cacheBytes,
	}
	for _, st := range tabs {
		op.Offsets = append(op.Offsets, op.Offsets[len(op.Offsets)-1]+st.N())
	}
	if err := op.Validate(); err != nil {
		t.Fatal(err)
	}
	return op, refs, tabs
}

// vec returns n deterministic values with a wide range of magnitudes.
func vec(n int, seed float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Sin(float64(i)*0.731+seed) * math.Exp(math.Cos(float64(i)*1.37+seed))
	}
	return v
}

// statsBytes is the deterministic encoding of a statistic: equal bytes mean equal bits.
func statsBytes(t *testing.T, s reduce.Stats) []byte {
	t.Helper()
	m, err := EncodeStats(s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKernelTaskRoundTrip: every kind of kernel task survives encode/decode and its decoded
// form computes the same statistics on every shard, bit for bit. The original op keeps no
// kernel blocks and the decoded one (default budget) caches them, so this also checks that
// the cache never changes the bits.
func TestKernelTaskRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, budget := range []struct {
		name  string
		bytes int64
	}{{"uncached original", -1}, {"cached original", 0}, {"partly cached original", 300 * 100 * 8}} {
		op, refs, tabs := kernelOp(t, 3, []float64{0.7, 1.3}, budget.bytes)
		n := op.N()
		cases := []struct {
			name string
			task *tasks.KernelTask
		}{
			{"mvm one vector", &tasks.KernelTask{Op: op, Kind: tasks.KernelMVM, K: 1, V: vec(n, 1)}},
			{"mvm", &tasks.KernelTask{Op: op, Kind: tasks.KernelMVM, K: 3, V: vec(3*n, 2)}},
			{"mvm over columns", &tasks.KernelTask{Op: op, Kind: tasks.KernelMVM, K: 2, V: vec(2*5, 8), Idx: []int{4, 0, n - 1, 150, 4}}},
			{"quad", &tasks.KernelTask{Op: op, Kind: tasks.KernelQuad, K: 2, A: vec(2*n, 3), B: vec(2*n, 4)}},
			{"cols", &tasks.KernelTask{Op: op, Kind: tasks.KernelCols, Idx: []int{0, 17, n - 1, 17}}},
		}
		dec := NewDecoder()
		for _, tc := range cases {
			t.Run(budget.name+"/"+tc.name, func(t *testing.T) {
				m, err := EncodeTask(tc.task)
				if err != nil {
					t.Fatal(err)
				}
				// Through bytes, as on the network.
				b, err := proto.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				var m2 pb.Task
				if err := proto.Unmarshal(b, &m2); err != nil {
					t.Fatal(err)
				}
				back, err := dec.DecodeTask(&m2)
				if err != nil {
					t.Fatal(err)
				}
				kt, ok := back.(*tasks.KernelTask)
				if !ok {
					t.Fatalf("decoded a %T", back)
				}
				if kt.Kind != tc.task.Kind || kt.Op.CacheBytes != 0 || kt.Op.Kernel.Family != kernel.Matern32 {
					t.Errorf("decoded kind %d, cache budget %d, family %v", kt.Kind, kt.Op.CacheBytes, kt.Op.Kernel.Family)
				}
				for round := 0; round < 2; round++ { // the second round runs on cached blocks
					for i, ref := range refs {
						want, err := tc.task.Map(ctx, ref, tabs[i])
						if err != nil {
							t.Fatal(err)
						}
						got, err := back.Map(ctx, ref, tabs[i])
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(statsBytes(t, want), statsBytes(t, got)) {
							t.Fatalf("round %d, shard %d: the decoded task computes different bits", round, i)
						}
						st, err := DecodeStats(mustEncodeStats(t, got))
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(statsBytes(t, st), statsBytes(t, want)) {
							t.Fatalf("shard %d: the statistic changed in its round trip", i)
						}
					}
				}
			})
		}
	}
}

func mustEncodeStats(t *testing.T, s reduce.Stats) *pb.Stats {
	t.Helper()
	m, err := EncodeStats(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestKernelOpShared: the tasks of one op decode to one *tasks.KernelOp (it holds the kernel
// blocks), and the decoder keeps only the two most recently used ops.
func TestKernelOpShared(t *testing.T) {
	opA, _, _ := kernelOp(t, 3, []float64{0.7, 1.3}, 0)
	opB, _, _ := kernelOp(t, 3, []float64{0.8, 1.3}, 0)
	opC, _, _ := kernelOp(t, 3, []float64{0.9, 1.3}, 0)
	n := opA.N()
	enc := func(op *tasks.KernelOp, kind tasks.KernelTaskKind) *pb.Task {
		t.Helper()
		task := &tasks.KernelTask{Op: op, Kind: kind}
		switch kind {
		case tasks.KernelMVM:
			task.K, task.V = 2, vec(2*n, 5)
		case tasks.KernelQuad:
			task.K, task.A, task.B = 1, vec(n, 6), vec(n, 7)
		case tasks.KernelCols:
			task.Idx = []int{3}
		}
		m, err := EncodeTask(task)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	dec := NewDecoder()
	decOp := func(m *pb.Task) *tasks.KernelOp {
		t.Helper()
		task, err := dec.DecodeTask(m)
		if err != nil {
			t.Fatal(err)
		}
		return task.(*tasks.KernelTask).Op
	}
	a := decOp(enc(opA, tasks.KernelMVM))
	if a == opA {
		t.Fatal("the decoder returned the encoder's op")
	}
	for _, kind := range []tasks.KernelTaskKind{tasks.KernelMVM, tasks.KernelQuad, tasks.KernelCols} {
		if got := decOp(enc(opA, kind)); got != a {
			t.Errorf("kind %d: a task of the same op decoded to another *KernelOp", kind)
		}
	}
	// A clone of the op (same values, new slices) is the same op.
	clone := &tasks.KernelOp{Kernel: opA.Kernel, X: append([]float64(nil), opA.X...), Offsets: append([]int(nil), opA.Offsets...),
		CacheBytes: -1} // the budget is not sent
	if decOp(enc(clone, tasks.KernelCols)) != a {
		t.Error("an equal op decoded to another *KernelOp")
	}
	b := decOp(enc(opB, tasks.KernelMVM))
	if b == a {
		t.Fatal("different ops share a *KernelOp")
	}
	// A was used before B; using A again makes B the least recently used, so C evicts B.
	if decOp(enc(opA, tasks.KernelCols)) != a {
		t.Error("op A was evicted with only two ops decoded")
	}
	c := decOp(enc(opC, tasks.KernelMVM))
	if c == a || c == b {
		t.Fatal("op C shares another op's *KernelOp")
	}
	if decOp(enc(opA, tasks.KernelMVM)) != a {
		t.Error("op A, used more recently than B, was evicted")
	}
	if decOp(enc(opB, tasks.KernelMVM)) == b {
		t.Error("the decoder keeps more than two kernel ops")
	}
	// Feature maps do not push kernel ops out, nor the other way round.
	if len(dec.ops.order) != 2 || len(dec.maps.order) != 0 {
		t.Errorf("%d ops and %d maps cached", len(dec.ops.order), len(dec.maps.order))
	}
}

// TestKernelTaskMalformed: malformed kernel task messages are rejected with a "decode task"
// error, never a panic, and encoding rejects tasks that do not check.
func TestKernelTaskMalformed(t *testing.T) {
	op, _, _ := kernelOp(t, 3, []float64{0.7, 1.3}, 0)
	n := op.N()
	good := func(kind tasks.KernelTaskKind) *pb.KernelTask {
		task := &tasks.KernelTask{Op: op, Kind: kind}
		switch kind {
		case tasks.KernelMVM:
			task.K, task.V = 2, vec(2*n, 1)
		case tasks.KernelQuad:
			task.K, task.A, task.B = 2, vec(2*n, 2), vec(2*n, 3)
		case tasks.KernelCols:
			task.Idx = []int{1, 2}
		}
		m, err := EncodeTask(task)
		if err != nil {
			t.Fatal(err)
		}
		return proto.Clone(m.GetKernel()).(*pb.KernelTask) // spoiling must not touch op's slices
	}
	cases := []struct {
		name  string
		kind  tasks.KernelTaskKind
		spoil func(m *pb.KernelTask)
		want  string
	}{
		{"no op", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op = nil }, "without a kernel op"},
		{"kind 0", tasks.KernelMVM, func(m *pb.KernelTask) { m.Kind = 0 }, "unknown kind 0"},
		{"negative kind", tasks.KernelMVM, func(m *pb.KernelTask) { m.Kind = -1 }, "unknown kind -1"},
		{"kind 4", tasks.KernelMVM, func(m *pb.KernelTask) { m.Kind = 4 }, "unknown kind 4"},
		{"unknown kernel", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.Kernel = "periodic" }, "periodic"},
		{"no lengthscales", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.Lengthscales = nil }, "no lengthscales"},
		{"negative lengthscale", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.Lengthscales = []float64{1, -1} }, "lengthscale 1"},
		{"NaN lengthscale", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.Lengthscales = []float64{math.NaN(), 1} }, "lengthscale 0"},
		{"zero signal variance", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.SignalVariance = 0 }, "signal variance"},
		// Inputs spoiled with their hash dropped (as a sender that sets none) reach the checks
		// of the op; with the hash kept, the hash check catches them first.
		{"no inputs", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.X, m.Op.XSha256 = nil, nil }, "no input values and no x_sha256"},
		{"ragged inputs", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.X, m.Op.XSha256 = m.Op.X[:len(m.Op.X)-1], nil }, "input values"},
		{"NaN input", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.X[5], m.Op.XSha256 = math.NaN(), nil }, "not finite"},
		{"Inf input", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.X[0], m.Op.XSha256 = math.Inf(-1), nil }, "not finite"},
		{"ragged inputs, hash kept", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.X = m.Op.X[:len(m.Op.X)-1] }, "does not match the inputs"},
		{"NaN input, hash kept", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.X[5] = math.NaN() }, "does not match the inputs"},
		{"changed input, hash kept", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.X[7] = math.Nextafter(m.Op.X[7], 10) }, "does not match the inputs"},
		{"changed hash", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.XSha256[31] ^= 1 }, "does not match the inputs"},
		{"short hash", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.XSha256 = m.Op.XSha256[:31] }, "x_sha256 of 31 bytes"},
		{"short hash, slim", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.X, m.Op.XSha256 = nil, m.Op.XSha256[:16] }, "x_sha256 of 16 bytes"},
		{"slim, blob not held", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.X = nil }, "missing blob sha256:"},
		{"no offsets", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.Offsets = nil }, "offsets"},
		{"one offset", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.Offsets = []int64{0} }, "offsets"},
		{"offsets not from 0", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.Offsets[0] = 1 }, "offsets"},
		{"offsets short of n", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.Offsets[len(m.Op.Offsets)-1]-- }, "offsets"},
		{"offsets past n", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.Offsets[len(m.Op.Offsets)-1] = 1 << 40 }, "offsets"},
		{"decreasing offsets", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.Offsets[1] = m.Op.Offsets[2] + 1 }, "decrease"},
		{"negative offset", tasks.KernelMVM, func(m *pb.KernelTask) { m.Op.Offsets[1] = -5 }, "offset"},
		{"mvm k 0", tasks.KernelMVM, func(m *pb.KernelTask) { m.K = 0 }, "vectors"},
		{"mvm negative k", tasks.KernelMVM, func(m *pb.KernelTask) { m.K = -2 }, "vectors"},
		{"mvm k mismatch", tasks.KernelMVM, func(m *pb.KernelTask) { m.K = 3 }, "vectors"},
		{"mvm huge k", tasks.KernelMVM, func(m *pb.KernelTask) { m.K = math.MaxInt32 }, "vectors"},
		{"mvm short v", tasks.KernelMVM, func(m *pb.KernelTask) { m.V = m.V[1:] }, "vectors"},
		{"mvm idx short of v", tasks.KernelMVM, func(m *pb.KernelTask) { m.Idx = []int32{1} }, "vectors of 1 rows"},
		{"mvm idx out of range", tasks.KernelMVM, func(m *pb.KernelTask) { m.Idx, m.V = []int32{1, int32(n)}, vec(4, 1) }, "column 300"},
		{"mvm idx negative", tasks.KernelMVM, func(m *pb.KernelTask) { m.Idx, m.V = []int32{-1}, vec(2, 1) }, "column -1"},
		{"mvm with a", tasks.KernelMVM, func(m *pb.KernelTask) { m.A = []float64{1} }, "does not use"},
		{"quad k mismatch", tasks.KernelQuad, func(m *pb.KernelTask) { m.K = 1 }, "pairs"},
		{"quad short b", tasks.KernelQuad, func(m *pb.KernelTask) { m.B = m.B[:n] }, "pairs"},
		{"quad no a", tasks.KernelQuad, func(m *pb.KernelTask) { m.A = nil }, "pairs"},
		{"quad with v", tasks.KernelQuad, func(m *pb.KernelTask) { m.V = []float64{1} }, "does not use"},
		{"cols none", tasks.KernelCols, func(m *pb.KernelTask) { m.Idx = nil }, "no columns"},
		{"cols negative", tasks.KernelCols, func(m *pb.KernelTask) { m.Idx[1] = -1 }, "column -1"},
		{"cols n", tasks.KernelCols, func(m *pb.KernelTask) { m.Idx[0] = int32(n) }, "column 300"},
		{"cols huge", tasks.KernelCols, func(m *pb.KernelTask) { m.Idx[0] = math.MaxInt32 }, "column 2147483647"},
		{"cols with k", tasks.KernelCols, func(m *pb.KernelTask) { m.K = 2 }, "does not use"},
		{"cols with b", tasks.KernelCols, func(m *pb.KernelTask) { m.B = vec(n, 1) }, "does not use"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := good(tc.kind)
			tc.spoil(m)
			dec := NewDecoder()
			task, err := dec.DecodeTask(&pb.Task{Kind: &pb.Task_Kernel{Kernel: m}})
			if err == nil {
				t.Fatalf("accepted: a %T of kind %d", task, m.GetKind())
			}
			if !strings.HasPrefix(err.Error(), "decode task: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want one starting \"decode task: \" and mentioning %q", err, tc.want)
			}
			if len(dec.ops.order) > 0 && !strings.Contains(tc.name, "mvm") && !strings.Contains(tc.name, "quad") && !strings.Contains(tc.name, "cols") {
				t.Error("a malformed op was cached")
			}
		})
	}
	if _, err := NewDecoder().DecodeTask(&pb.Task{Kind: &pb.Task_Kernel{}}); err == nil {
		t.Error("an empty kernel task was accepted")
	}

	// Encoding checks the task too.
	bad := &tasks.KernelOp{Kernel: op.Kernel, X: op.X, Offsets: []int{0, 1}}
	for name, task := range map[string]*tasks.KernelTask{
		"no op":      {Kind: tasks.KernelMVM, K: 1, V: vec(n, 1)},
		"bad op":     {Op: bad, Kind: tasks.KernelMVM, K: 1, V: vec(n, 1)},
		"bad shape":  {Op: op, Kind: tasks.KernelMVM, K: 2, V: vec(n, 1)},
		"bad kind":   {Op: op, Kind: 9},
		"bad column": {Op: op, Kind: tasks.KernelCols, Idx: []int{n}},
	} {
		if _, err := EncodeTask(task); err == nil || !strings.HasPrefix(err.Error(), "encode task: ") {
			t.Errorf("%s: encode error %v", name, err)
		}
	}
}
