package tasks

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/kernel"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// The kernel kind: KernelTask. Its op carries the inputs X, the same for every task of a job,
// as a broadcast blob (DESIGN.md §3): the encoder sends X with its SHA-256, Slim strips X and
// leaves the hash, and the decoder keeps the X of every full op it decodes (Env.KeepBlob) and
// resolves slim ops from the blobs it holds (Env.Blob).

// MaxBroadcastBytes bounds the inputs X a kernel task carries (512 MiB, 8 bytes per value).
// A task travels in one gRPC message of at most 1 GiB (worker.MaxMessageBytes) and broadcast
// blobs are not chunked, so larger inputs are rejected when the task is encoded; half the
// message limit leaves room for the task's vectors.
const MaxBroadcastBytes = 512 << 20

// broadcastLimit is MaxBroadcastBytes, lowered by tests.
var broadcastLimit int64 = MaxBroadcastBytes

func init() {
	register(Kind{
		Name:   "kernel",
		Types:  []engine.Task{(*KernelTask)(nil)},
		Encode: encodeKernel,
		Decode: decodeKernel,
		Inputs: func(t engine.Task) []int { return []int{t.(*KernelTask).Op.Kernel.Dim()} },
		Slim:   slimKernel,
		Example: func() engine.Task {
			_, tab := SmallShard()
			op := &KernelOp{
				Kernel:  kernel.Kernel{Family: kernel.Matern52, Lengthscales: []float64{0.8, 1.2}, SignalVariance: 1.3},
				X:       tab.X,
				Offsets: []int{0, tab.N()},
			}
			v := make([]float64, 2*tab.N())
			for i := range v {
				v[i] = math.Sin(float64(i) * 0.37)
			}
			return &KernelTask{Op: op, Kind: KernelMVM, K: 2, V: v}
		},
	})
}

// HashFloats returns the SHA-256 of x as little-endian IEEE 754 doubles: the content hash of a
// broadcast blob (pb.KernelOp.x_sha256).
func HashFloats(x []float64) [32]byte {
	h := sha256.New()
	var buf [8 * 1024]byte
	for len(x) > 0 {
		m := min(len(x), len(buf)/8)
		for i, v := range x[:m] {
			binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(v))
		}
		h.Write(buf[:8*m])
		x = x[m:]
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// encodeKernel returns the message of a kernel map step. Only the vectors its kind uses are
// sent; the op's CacheBytes is a per-process setting and is not. The op carries the inputs X
// in full with their SHA-256 (slimKernel strips them); inputs above MaxBroadcastBytes are
// rejected, since blobs are not chunked and a task must fit one gRPC message.
func encodeKernel(task engine.Task) (proto.Message, error) {
	t := task.(*KernelTask)
	if t.Op == nil {
		return nil, fmt.Errorf("kernel task without a kernel op")
	}
	if b := int64(len(t.Op.X)) * 8; b > broadcastLimit {
		return nil, fmt.Errorf("kernel inputs of %d bytes exceed the broadcast limit of %d bytes; use fewer rows or fewer rows per job",
			b, broadcastLimit)
	}
	if err := t.Op.Validate(); err != nil {
		return nil, err
	}
	if err := t.Check(); err != nil {
		return nil, err
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
	if t.Kind == KernelMVM || t.Kind == KernelQuad {
		if t.K > math.MaxInt32 {
			return nil, fmt.Errorf("kernel task of %d vectors", t.K)
		}
		m.K = int32(t.K)
	}
	switch t.Kind {
	case KernelMVM:
		m.V = t.V
	case KernelQuad:
		m.A, m.B = t.A, t.B
	}
	if t.Kind == KernelMVM || t.Kind == KernelCols {
		for _, v := range t.Idx {
			if v > math.MaxInt32 {
				return nil, fmt.Errorf("kernel column %d", v)
			}
			m.Idx = append(m.Idx, int32(v))
		}
	}
	return m, nil
}

// slimKernel returns the kernel task message without its inputs, named by their hash. A
// message whose op does not carry both the inputs and their hash is returned as it is.
func slimKernel(msg proto.Message) (proto.Message, [][32]byte) {
	kt, ok := msg.(*pb.KernelTask)
	op := kt.GetOp()
	if !ok || len(op.GetX()) == 0 || len(op.GetXSha256()) != sha256.Size {
		return msg, nil
	}
	var h [32]byte
	copy(h[:], op.GetXSha256())
	return &pb.KernelTask{
		Op:   slimOp(op, h),
		Kind: kt.GetKind(),
		K:    kt.GetK(),
		V:    kt.GetV(),
		A:    kt.GetA(),
		B:    kt.GetB(),
		Idx:  kt.GetIdx(),
	}, [][32]byte{h}
}

// slimOp returns op without its inputs, named by hash h.
func slimOp(op *pb.KernelOp, h [32]byte) *pb.KernelOp {
	return &pb.KernelOp{
		Kernel:         op.GetKernel(),
		Lengthscales:   op.GetLengthscales(),
		SignalVariance: op.GetSignalVariance(),
		Offsets:        op.GetOffsets(),
		XSha256:        h[:],
	}
}

// decodeKernel returns the kernel map step a message describes, sharing the kernel op of
// earlier tasks with the same op (see kernelOp).
func decodeKernel(env Env, msg proto.Message) (engine.Task, error) {
	m, err := message[*pb.KernelTask]("kernel", msg)
	if err != nil {
		return nil, err
	}
	if m.GetOp() == nil {
		return nil, fmt.Errorf("kernel task without a kernel op")
	}
	kind := KernelTaskKind(m.GetKind())
	var unused []string // vectors the kind does not read: a malformed message
	switch kind {
	case KernelMVM:
		if len(m.GetA())+len(m.GetB()) > 0 {
			unused = append(unused, "a, b")
		}
	case KernelQuad:
		if len(m.GetV()) > 0 {
			unused = append(unused, "v")
		}
		if len(m.GetIdx()) > 0 {
			unused = append(unused, "idx")
		}
	case KernelCols:
		if len(m.GetV())+len(m.GetA())+len(m.GetB()) > 0 {
			unused = append(unused, "v, a, b")
		}
		if m.GetK() != 0 {
			unused = append(unused, "k")
		}
	default:
		return nil, fmt.Errorf("kernel task of unknown kind %d", m.GetKind())
	}
	if len(unused) > 0 {
		return nil, fmt.Errorf("kernel task of kind %d sets %s, which it does not use", m.GetKind(), strings.Join(unused, " and "))
	}
	op, err := kernelOp(env, m.GetOp())
	if err != nil {
		return nil, err
	}
	t := &KernelTask{Op: op, Kind: kind, K: int(m.GetK()), V: m.GetV(), A: m.GetA(), B: m.GetB()}
	if len(m.GetIdx()) > 0 {
		t.Idx = make([]int, len(m.GetIdx()))
		for i, c := range m.GetIdx() {
			t.Idx[i] = int(c)
		}
	}
	if err := t.Check(); err != nil {
		return nil, err
	}
	return t, nil
}

// kernelOp returns the kernel op a message describes, shared with earlier messages of the
// same op whether full or slim: every task of one hyperparameter value shares one *KernelOp,
// which holds that value's kernel blocks, so ops are kept in OpCache keyed by their slim form
// (the inputs' hash, the kernel and the offsets) and a key never hashes the inputs themselves.
// A full op's inputs are checked against its hash and kept as a blob; a slim op takes them
// from the blobs env holds, failing with env's missing-blob error when it does not hold them
// and the op is not cached.
func kernelOp(env Env, m *pb.KernelOp) (*KernelOp, error) {
	x, sum := m.GetX(), m.GetXSha256()
	var h [32]byte
	switch {
	case len(sum) != 0 && len(sum) != sha256.Size:
		return nil, fmt.Errorf("kernel op: x_sha256 of %d bytes, want %d", len(sum), sha256.Size)
	case len(x) > 0:
		h = HashFloats(x)
		if len(sum) > 0 && !bytes.Equal(sum, h[:]) {
			return nil, fmt.Errorf("kernel op: x_sha256 %x does not match the inputs (sha256 %x)", sum, h)
		}
	case len(sum) == 0:
		return nil, fmt.Errorf("kernel op: no input values and no x_sha256")
	default:
		copy(h[:], sum)
	}
	full := len(x) > 0
	v, err := env.Shared(OpCache, slimOp(m, h), func() (any, error) {
		// A held blob is used even for a full op, so that ops and the blobs share one copy.
		held, err := env.Blob(h)
		switch {
		case err == nil:
			x = held
		case !full:
			return nil, err
		}
		return newKernelOp(m, x)
	})
	if err != nil {
		return nil, err
	}
	op, ok := v.(*KernelOp)
	if !ok {
		return nil, fmt.Errorf("cached kernel op is a %T", v)
	}
	if full {
		env.KeepBlob(h, op.X) // the op's inputs passed Validate
	} else {
		env.UsedBlob(h)
	}
	return op, nil
}

// newKernelOp builds the kernel op a message with inputs x describes, after
// KernelOp.Validate.
func newKernelOp(m *pb.KernelOp, x []float64) (*KernelOp, error) {
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
	op := &KernelOp{
		Kernel:  kernel.Kernel{Family: fam, Lengthscales: m.GetLengthscales(), SignalVariance: m.GetSignalVariance()},
		X:       x,
		Offsets: offsets,
	}
	if err := op.Validate(); err != nil {
		return nil, err
	}
	return op, nil
}
