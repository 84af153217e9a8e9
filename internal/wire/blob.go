package wire

// Broadcast blobs (DESIGN.md §3): the inputs X of a kernel op are the same for every task of a
// job, so they travel to a worker once and are named by content hash (tasks.HashFloats)
// afterwards. The encoder puts X and its SHA-256 in the op; Slim strips X from a task, leaving
// the hash; the worker's Decoder keeps the X of every full op it decodes in a BlobCache and
// resolves slim ops from it, failing with a *MissingBlobError (ErrMissingBlob) when it does
// not hold the blob. The worker answers that as FAILED_PRECONDITION with a pb.MissingBlob
// detail (MissingBlobStatus), which the coordinator recognizes (MissingBlobOf) and answers by
// resending the task in full.
//
// Blobs are not chunked: a task, X included, must fit one gRPC message (1 GiB), so the
// encoder rejects inputs above tasks.MaxBroadcastBytes.

import (
	"container/list"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/tasks"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// DefaultBlobCacheBytes is the default budget of a BlobCache (2 GiB).
const DefaultBlobCacheBytes = 2 << 30

// ErrMissingBlob is matched (errors.Is) by the error of decoding a task that names a blob by
// hash when the decoder does not hold it.
var ErrMissingBlob = errors.New("missing blob")

// MissingBlobError is the error of decoding a slim task whose blob the decoder does not hold.
type MissingBlobError struct {
	Hash [32]byte
}

// missingBlobMark starts the message of a MissingBlobError, followed by the hash in hex; a
// worker's status message contains it.
const missingBlobMark = "missing blob sha256:"

func (e *MissingBlobError) Error() string {
	return missingBlobMark + hex.EncodeToString(e.Hash[:]) +
		": the worker does not hold the task's kernel inputs (it restarted or evicted them); send them in full"
}

// Is makes errors.Is(err, ErrMissingBlob) hold.
func (e *MissingBlobError) Is(target error) bool { return target == ErrMissingBlob }

// MissingBlobStatus returns the gRPC status error a worker answers a task whose decoding
// failed with err, which wraps a *MissingBlobError: FAILED_PRECONDITION with the error's
// message and a pb.MissingBlob detail naming the hash. It returns nil if err wraps none.
func MissingBlobStatus(err error) error {
	var mb *MissingBlobError
	if !errors.As(err, &mb) {
		return nil
	}
	st := status.New(codes.FailedPrecondition, "run task: "+err.Error())
	if d, derr := st.WithDetails(&pb.MissingBlob{Sha256: mb.Hash[:]}); derr == nil {
		st = d
	}
	return st.Err()
}

// MissingBlobOf reports whether err (possibly wrapped) is a worker's missing-blob answer, and
// the hash of the blob it lacks: a FAILED_PRECONDITION status with a pb.MissingBlob detail or,
// failing that, with a message containing "missing blob sha256:<hex>".
func MissingBlobOf(err error) ([32]byte, bool) {
	var h [32]byte
	st, ok := statusOf(err, codes.FailedPrecondition)
	if !ok {
		return h, false
	}
	for _, d := range st.Details() {
		if m, ok := d.(*pb.MissingBlob); ok && len(m.GetSha256()) == len(h) {
			copy(h[:], m.GetSha256())
			return h, true
		}
	}
	msg := st.Message()
	i := strings.Index(msg, missingBlobMark)
	if i < 0 {
		return h, false
	}
	hexHash := msg[i+len(missingBlobMark):]
	if len(hexHash) < 2*len(h) {
		return h, false
	}
	if _, err := hex.Decode(h[:], []byte(hexHash[:2*len(h)])); err != nil {
		return [32]byte{}, false
	}
	return h, true
}

// Slim returns the form of task that names its broadcast blobs by hash instead of carrying
// them, and the hashes (its kind's tasks.Kind.Slim). A task without blobs (anything but a
// kernel task whose op carries its inputs and their hash, as EncodeTask makes it) is returned
// as is, with no hashes. The slim task shares every other field with task; neither is
// modified.
func Slim(task *pb.Task) (slim *pb.Task, blobs [][32]byte) {
	name, m := tasks.Unwrap(task)
	k, ok := tasks.Lookup(name)
	if !ok || k.Slim == nil {
		return task, nil
	}
	sm, blobs := k.Slim(m)
	if len(blobs) == 0 {
		return task, nil
	}
	slim, err := tasks.Wrap(name, sm)
	if err != nil { // a kind's Slim returned another message type: send the task in full
		return task, nil
	}
	return slim, blobs
}

// BlobCache holds broadcast blobs (kernel inputs) by content hash, evicting the least recently
// used beyond a budget in bytes (8 per value). A blob larger than the budget is not kept. It
// is safe for concurrent use.
type BlobCache struct {
	max int64

	mu    sync.Mutex
	items map[[32]byte]*list.Element // of *blobEntry
	lru   list.List                  // most recently used first
	bytes int64

	hits, misses, evictions atomic.Uint64
}

type blobEntry struct {
	hash [32]byte
	x    []float64
}

// BlobStats is a snapshot of a BlobCache. Hits and Misses count the slim tasks whose blob a
// Decoder found or did not find.
type BlobStats struct {
	Blobs     int
	Bytes     int64
	Hits      uint64
	Misses    uint64
	Evictions uint64
}

// NewBlobCache returns an empty cache with a budget of maxBytes (0: DefaultBlobCacheBytes;
// negative: keep nothing).
func NewBlobCache(maxBytes int64) *BlobCache {
	if maxBytes == 0 {
		maxBytes = DefaultBlobCacheBytes
	}
	return &BlobCache{max: maxBytes, items: map[[32]byte]*list.Element{}}
}

func blobBytes(x []float64) int64 { return int64(len(x)) * 8 }

// Get returns the blob of hash h, marking it most recently used.
func (c *BlobCache) Get(h [32]byte) ([]float64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[h]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(e)
	return e.Value.(*blobEntry).x, true
}

// Put stores blob x under its hash h (the caller has checked it) as the most recently used,
// evicting the least recently used blobs to stay within the budget, and returns the stored
// blob: an equal one already held, else x. The caller must not modify x afterwards.
func (c *BlobCache) Put(h [32]byte, x []float64) []float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[h]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*blobEntry).x
	}
	size := blobBytes(x)
	if c.max < 0 || size > c.max {
		return x
	}
	for c.bytes+size > c.max {
		back := c.lru.Back()
		old := back.Value.(*blobEntry)
		c.lru.Remove(back)
		delete(c.items, old.hash)
		c.bytes -= blobBytes(old.x)
		c.evictions.Add(1)
	}
	c.items[h] = c.lru.PushFront(&blobEntry{hash: h, x: x})
	c.bytes += size
	return x
}

// Clear drops every blob (the counters stay).
func (c *BlobCache) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items = map[[32]byte]*list.Element{}
	c.lru.Init()
	c.bytes = 0
}

// Stats returns the cache's size and counters.
func (c *BlobCache) Stats() BlobStats {
	c.mu.Lock()
	n, b := len(c.items), c.bytes
	c.mu.Unlock()
	return BlobStats{Blobs: n, Bytes: b, Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load()}
}
