package tasks_test

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/gpreduce/gpreduce/internal/engine"
	"github.com/gpreduce/gpreduce/internal/reduce"
	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
	"github.com/gpreduce/gpreduce/internal/train"
)

// recording is an engine that notes the kind of every map task it runs.
type recording struct {
	engine.Engine
	mu    sync.Mutex
	kinds map[string]bool
	bad   []string
}

func (r *recording) note(t engine.Task) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := tasks.Of(t)
	if !ok {
		r.bad = append(r.bad, "unregistered")
		return
	}
	r.kinds[k.Name] = true
}

func (r *recording) Reduce(ctx context.Context, t engine.Task) (reduce.Stats, error) {
	r.note(t)
	return r.Engine.Reduce(ctx, t)
}

func (r *recording) Gather(ctx context.Context, t engine.Task) ([]reduce.Stats, error) {
	r.note(t)
	return r.Engine.Gather(ctx, t)
}

// smallEngine returns a local engine over three shards of a smooth 2-input function.
func smallEngine(t *testing.T) engine.Engine {
	t.Helper()
	const shards, rows = 3, 60
	refs := make([]shard.Ref, shards)
	data := make([]*shard.Table, shards)
	for s := range shards {
		tab := &shard.Table{Source: "small", D: 2}
		for i := range rows {
			j := float64(s*rows + i)
			a, b := math.Sin(j*0.37)*2, math.Cos(j*0.11)*2
			tab.X = append(tab.X, a, b)
			tab.Y = append(tab.Y, math.Sin(a)+0.5*b+0.05*math.Sin(j*7.3))
		}
		refs[s] = shard.Ref{Index: s, Source: "small", Rows: rows}
		data[s] = tab
	}
	eng, err := engine.NewLocal(refs, data, 2)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// TestEveryMethodsTasks walks the method registry with no per-method code: every kind of map
// task a method lists is registered here and survives the wire round trip (roundTrip), and
// the method, trained on a small engine, runs no kind of task it does not list.
func TestEveryMethodsTasks(t *testing.T) {
	for _, m := range train.Methods() {
		t.Run(m.Name, func(t *testing.T) {
			for _, k := range m.Tasks {
				t.Run(k, func(t *testing.T) { roundTrip(t, k) })
			}
			rec := &recording{Engine: smallEngine(t), kinds: map[string]bool{}}
			spec := train.DefaultSpec(m.Name)
			spec.MaxIter, spec.Seed = 3, 1
			if _, err := train.Run(t.Context(), rec, spec, train.Hooks{}); err != nil {
				t.Fatalf("train %s: %v", m.Name, err)
			}
			if len(rec.bad) > 0 {
				t.Errorf("%s ran a task of no registered kind", m.Name)
			}
			for k := range rec.kinds {
				if !slices.Contains(m.Tasks, k) {
					t.Errorf("%s ran a %q task but lists only %v", m.Name, k, m.Tasks)
				}
			}
		})
	}
}
