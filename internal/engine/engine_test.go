package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/testutil"
)

// randomTable returns n rows of d inputs and a target, with a wide spread of magnitudes so that
// a change in summation order would show in the low bits.
func randomTable(seed uint64, n, d int) *shard.Table {
	rng := rand.New(rand.NewPCG(seed, 11))
	t := &shard.Table{Source: "mem", D: d, X: make([]float64, n*d), Y: make([]float64, n)}
	for i := range t.X {
		t.X[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(7)-3))
	}
	for i := range t.Y {
		t.Y[i] = 1e4 + rng.NormFloat64()
	}
	return t
}

func newLocal(t testing.TB, tab *shard.Table, rowsPerShard, workers int) *Local {
	t.Helper()
	refs, tabs := shard.Partition(tab, rowsPerShard)
	l, err := NewLocal(refs, tabs, workers)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// taskFunc adapts a function to Task.
type taskFunc func(ctx context.Context, ref shard.Ref, data *shard.Table) (reduce.Stats, error)

func (f taskFunc) Map(ctx context.Context, ref shard.Ref, data *shard.Table) (reduce.Stats, error) {
	return f(ctx, ref, data)
}

// rowsTask returns the shard's rows after sleeping a random, shard-dependent time, so shards
// finish in an order unrelated to shard order.
func rowsTask(seed uint64) Task {
	return taskFunc(func(ctx context.Context, ref shard.Ref, data *shard.Table) (reduce.Stats, error) {
		rng := rand.New(rand.NewPCG(seed, uint64(ref.Index)))
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		return &reduce.Rows{D: data.D, X: append([]float64(nil), data.X...), Y: append([]float64(nil), data.Y...)}, nil
	})
}

func TestNewLocalErrors(t *testing.T) {
	refs, tabs := shard.Partition(randomTable(1, 10, 2), 3)
	tests := []struct {
		name string
		refs []shard.Ref
		data []*shard.Table
		want string
	}{
		{"more refs", refs, tabs[:2], "4 refs for 2 shards"},
		{"more data", refs[:1], tabs, "1 refs for 4 shards"},
		{"no shards", nil, nil, "no shards"},
		{"empty slices", []shard.Ref{}, []*shard.Table{}, "no shards"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewLocal(tc.refs, tc.data, 4)
			if err == nil {
				t.Fatalf("NewLocal succeeded (%v), want an error containing %q", l, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestGatherShardOrder(t *testing.T) {
	tab := randomTable(2, 97, 2)
	tests := []struct {
		rowsPerShard, workers int
	}{
		{97, 1}, {10, 1}, {10, 3}, {10, 16}, {1, 8}, {7, 0}, {7, -5},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("rows=%d/workers=%d", tc.rowsPerShard, tc.workers), func(t *testing.T) {
			l := newLocal(t, tab, tc.rowsPerShard, tc.workers)
			for seed := uint64(0); seed < 3; seed++ {
				out, err := l.Gather(context.Background(), rowsTask(seed))
				if err != nil {
					t.Fatal(err)
				}
				if len(out) != len(l.Shards()) {
					t.Fatalf("%d results for %d shards", len(out), len(l.Shards()))
				}
				for i, st := range out {
					ref := l.Shards()[i]
					r := st.(*reduce.Rows)
					want := tab.Y[ref.First : ref.First+ref.Rows]
					if len(r.Y) != len(want) || (len(want) > 0 && r.Y[0] != want[0]) {
						t.Fatalf("result %d holds the wrong shard's rows", i)
					}
				}
				merged, err := l.Reduce(context.Background(), rowsTask(seed+100))
				if err != nil {
					t.Fatal(err)
				}
				r := merged.(*reduce.Rows)
				if !bitsEqual(r.X, tab.X) || !bitsEqual(r.Y, tab.Y) {
					t.Fatalf("Reduce of Rows does not reproduce the table in order")
				}
			}
		})
	}
}

func bitsEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

func momentsBitsEqual(a, b *reduce.Moments) bool {
	return a.N == b.N && bitsEqual(a.Mean, b.Mean) && bitsEqual(a.M2, b.M2) && bitsEqual(a.Min, b.Min) && bitsEqual(a.Max, b.Max)
}

// TestReduceBitwiseAcrossWorkers: Moments reduced over random shards are bitwise identical on
// 1 and 8 workers (and on a few other counts), with shard completion order randomised.
func TestReduceBitwiseAcrossWorkers(t *testing.T) {
	tests := []struct {
		n, d, rowsPerShard int
	}{
		{1000, 3, 37}, {150, 1, 1}, {64, 5, 64}, {2049, 2, 100},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("n=%d/d=%d/per=%d", tc.n, tc.d, tc.rowsPerShard), func(t *testing.T) {
			tab := randomTable(uint64(tc.n*31+tc.d), tc.n, tc.d)
			jittered := taskFunc(func(ctx context.Context, ref shard.Ref, data *shard.Table) (reduce.Stats, error) {
				time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond) // unseeded on purpose
				return shard.MomentsTask{}.Map(ctx, ref, data)
			})
			var want *reduce.Moments
			for _, workers := range []int{1, 8, 2, 3, 64} {
				l := newLocal(t, tab, tc.rowsPerShard, workers)
				st, err := l.Reduce(context.Background(), jittered)
				if err != nil {
					t.Fatal(err)
				}
				got := st.(*reduce.Moments)
				if got.N != tc.n {
					t.Fatalf("workers=%d: N = %d, want %d", workers, got.N, tc.n)
				}
				if want == nil {
					want = got
					continue
				}
				if !momentsBitsEqual(got, want) {
					t.Errorf("workers=%d: moments differ from 1 worker:\n%+v\n%+v", workers, got, want)
				}
			}
		})
	}
}

var errBoom = errors.New("boom")

// TestGatherFirstErrorInShardOrder: when several shards fail, the error of the first failing
// shard in shard order is returned (not the first in time), wrapped so that it names the shard
// as shard.Ref.String does and still matches the task's error with errors.Is.
func TestGatherFirstErrorInShardOrder(t *testing.T) {
	tests := []struct {
		name    string
		shards  int
		workers int
		fail    []int // failing shards; the first fails last in time
		block   []int // shards that run until cancelled (need workers >= shards)
		want    int
	}{
		{"one failure", 8, 8, []int{3}, nil, 3},
		{"one failure sequential", 8, 1, []int{3}, nil, 3},
		{"later shard fails first", 8, 8, []int{3, 6}, nil, 3},
		{"three failures", 10, 4, []int{2, 3, 9}, nil, 2},
		{"last shard", 5, 2, []int{4}, nil, 4},
		{"earlier shards cancelled by the failure", 8, 8, []int{3, 5}, []int{0, 1, 6}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab := randomTable(3, tc.shards*4, 1)
			l := newLocal(t, tab, 4, tc.workers)
			first := tc.fail[0]
			started := make(chan struct{}) // closed when the first failing shard's Map runs
			var once sync.Once
			task := taskFunc(func(ctx context.Context, ref shard.Ref, data *shard.Table) (reduce.Stats, error) {
				if slices.Contains(tc.block, ref.Index) {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				for _, f := range tc.fail {
					if ref.Index != f {
						continue
					}
					if f == first {
						once.Do(func() { close(started) })
						time.Sleep(20 * time.Millisecond) // fail after the others, ignoring ctx
						return nil, fmt.Errorf("first: %w", errBoom)
					}
					select { // a later shard fails as soon as the first one is running
					case <-started:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
					return nil, fmt.Errorf("later: %w", errBoom)
				}
				return shard.MomentsTask{}.Map(ctx, ref, data)
			})
			for _, run := range []struct {
				name string
				call func() error
			}{
				{"Gather", func() error { _, err := l.Gather(context.Background(), task); return err }},
				{"Reduce", func() error { _, err := l.Reduce(context.Background(), task); return err }},
			} {
				started = make(chan struct{})
				once = sync.Once{}
				err := run.call()
				if err == nil {
					t.Fatalf("%s succeeded, want shard %d's error", run.name, tc.want)
				}
				wantRef := l.Shards()[tc.want].String()
				if !strings.HasPrefix(err.Error(), wantRef+":") || !strings.Contains(err.Error(), "first: boom") {
					t.Errorf("%s error %q, want it to start with %q and carry the first failure", run.name, err, wantRef)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("shard %d ", tc.want)) {
					t.Errorf("%s error %q does not name shard %d", run.name, err, tc.want)
				}
				if !errors.Is(err, errBoom) {
					t.Errorf("%s error %q does not wrap the task's error", run.name, err)
				}
				if errors.Is(err, context.Canceled) {
					t.Errorf("%s error %q is a cancellation, want the real failure", run.name, err)
				}
			}
		})
	}
}

// TestReduceMergeErrorNamesShard: a shard whose statistic cannot be merged is named.
func TestReduceMergeErrorNamesShard(t *testing.T) {
	l := newLocal(t, randomTable(4, 20, 2), 5, 3)
	task := taskFunc(func(ctx context.Context, ref shard.Ref, data *shard.Table) (reduce.Stats, error) {
		if ref.Index == 2 {
			return reduce.NewGram(1), nil
		}
		return shard.MomentsTask{}.Map(ctx, ref, data)
	})
	_, err := l.Reduce(context.Background(), task)
	if err == nil || !strings.Contains(err.Error(), "shard 2") {
		t.Fatalf("Reduce error %v, want one naming shard 2", err)
	}
	if _, err := MergeInOrder(nil); err == nil {
		t.Errorf("MergeInOrder(nil) succeeded")
	}
}

// waitLimit bounds the tests' waits: it only bounds a hang, and no test measures time with it.
const waitLimit = testutil.MinWait

// settleGoroutines waits (testutil.Eventually, at least testutil.MinWait, a deadline that only
// bounds a hang) for the goroutine count to fall to at most limit, and fails the test if it does not.
func settleGoroutines(t *testing.T, limit int) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "goroutines back to the count before the round", func() error {
		if n := runtime.NumGoroutine(); n > limit {
			return fmt.Errorf("%d goroutines, want at most %d", n, limit)
		}
		return nil
	})
}

// TestGatherCancel: cancelling the parent context returns context.Canceled, however many
// shards are still queued (each Map call blocks until cancellation, so a Gather that ignored it
// would hang), and leaves no goroutine behind. How soon it returns is only logged.
func TestGatherCancel(t *testing.T) {
	tests := []struct {
		name            string
		shards, workers int
		preCancel       bool
	}{
		{"mid-round", 50, 4, false},
		{"mid-round one worker", 20, 1, false},
		{"more workers than shards", 3, 16, false},
		{"already cancelled", 10, 4, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLocal(t, randomTable(5, tc.shards, 1), 1, tc.workers)
			before := runtime.NumGoroutine()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var running, calls atomic.Int32
			inFlight := make(chan struct{}, tc.shards)
			task := taskFunc(func(ctx context.Context, ref shard.Ref, data *shard.Table) (reduce.Stats, error) {
				calls.Add(1)
				running.Add(1)
				defer running.Add(-1)
				inFlight <- struct{}{}
				<-ctx.Done() // a long shard that honours cancellation
				return nil, ctx.Err()
			})
			if tc.preCancel {
				cancel()
			}
			type result struct {
				err error
				at  time.Time
			}
			done := make(chan result, 1)
			go func() {
				_, err := l.Gather(ctx, task)
				done <- result{err, time.Now()}
			}()
			if !tc.preCancel {
				select {
				case <-inFlight:
				case <-time.After(waitLimit):
					t.Fatal("no Map call started")
				}
				time.Sleep(10 * time.Millisecond)
				cancel()
			}
			cancelledAt := time.Now()
			var res result
			select {
			case res = <-done:
			case <-time.After(waitLimit): // only bounds the hang of a Gather that ignores ctx
				t.Fatal("Gather did not return after cancellation")
			}
			if !errors.Is(res.err, context.Canceled) {
				t.Errorf("error %v, want context.Canceled", res.err)
			}
			t.Logf("Gather returned %v after cancellation", res.at.Sub(cancelledAt))
			if r := running.Load(); r != 0 {
				t.Errorf("%d Map calls still running after Gather returned", r)
			}
			if c := calls.Load(); tc.preCancel && c != 0 {
				t.Errorf("%d Map calls made with a context cancelled up front", c)
			} else if c > int32(min(tc.shards, max(1, tc.workers))) {
				t.Errorf("%d Map calls started for %d workers after cancellation", c, tc.workers)
			}
			settleGoroutines(t, before+2)
		})
	}
}

// TestGatherDeadline: a context deadline surfaces as context.DeadlineExceeded.
func TestGatherDeadline(t *testing.T) {
	l := newLocal(t, randomTable(6, 8, 1), 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := l.Reduce(ctx, taskFunc(func(ctx context.Context, ref shard.Ref, data *shard.Table) (reduce.Stats, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want context.DeadlineExceeded", err)
	}
}

// TestGatherConcurrencyBound: the number of Map calls running at once never exceeds the
// worker count, and reaches it when there are enough shards (each call waits for the pool to
// fill, until one shared deadline, so a pool that ran fewer at once would be caught too).
func TestGatherConcurrencyBound(t *testing.T) {
	tests := []struct {
		shards, workers int
	}{
		{20, 1}, {20, 3}, {20, 8}, {5, 8}, {9, 0},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("shards=%d/workers=%d", tc.shards, tc.workers), func(t *testing.T) {
			l := newLocal(t, randomTable(7, tc.shards, 1), 1, tc.workers)
			limit := int32(max(1, tc.workers))
			target := min(limit, int32(tc.shards))
			var running, peak atomic.Int32
			full := make(chan struct{})
			var once sync.Once
			// One deadline for every call (it only bounds the hang of a pool that never fills).
			fillWait, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			task := taskFunc(func(ctx context.Context, ref shard.Ref, data *shard.Table) (reduce.Stats, error) {
				n := running.Add(1)
				defer running.Add(-1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				if n >= target {
					once.Do(func() { close(full) })
				}
				select {
				case <-full:
				case <-fillWait.Done():
				}
				time.Sleep(time.Millisecond)
				return shard.MomentsTask{}.Map(ctx, ref, data)
			})
			if _, err := l.Reduce(context.Background(), task); err != nil {
				t.Fatal(err)
			}
			if p := peak.Load(); p > limit {
				t.Errorf("%d Map calls ran at once with %d workers", p, limit)
			} else if p < target {
				t.Errorf("at most %d Map calls ran at once; want %d with %d workers and %d shards", p, target, limit, tc.shards)
			}
		})
	}
}

func TestShardsInOrder(t *testing.T) {
	l := newLocal(t, randomTable(8, 25, 1), 4, 3)
	refs := l.Shards()
	if len(refs) != 7 {
		t.Fatalf("%d shards, want 7", len(refs))
	}
	for i, r := range refs {
		if r.Index != i || r.First != 4*i {
			t.Errorf("shard %d: %+v", i, r)
		}
	}
}
