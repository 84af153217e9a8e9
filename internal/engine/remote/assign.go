package remote

import (
	"cmp"
	"slices"
)

// move is one change of a shard's owner.
type move struct {
	shard    int
	from, to string
}

// normalize returns the workers sorted by ID with duplicate IDs and empty IDs dropped (the
// first of a duplicate wins).
func normalize(ws []Worker) []Worker {
	out := make([]Worker, 0, len(ws))
	for _, w := range ws {
		if w.ID != "" {
			out = append(out, w)
		}
	}
	slices.SortStableFunc(out, func(a, b Worker) int { return cmp.Compare(a.ID, b.ID) })
	return slices.CompactFunc(out, func(a, b Worker) bool { return a.ID == b.ID })
}

// ownedCounts returns how many shards each candidate owns (candidates with none included).
func ownedCounts(owners []string, candidates []Worker) map[string]int {
	n := make(map[string]int, len(candidates))
	for _, w := range candidates {
		n[w.ID] = 0
	}
	for _, o := range owners {
		if _, ok := n[o]; ok {
			n[o]++
		}
	}
	return n
}

// leastLoaded returns the candidate (sorted by ID, non-empty) owning the fewest shards; ties
// go to the smallest ID.
func leastLoaded(owners []string, candidates []Worker) Worker {
	return leastIn(ownedCounts(owners, candidates), candidates)
}

// leastIn returns the candidate (sorted by ID, non-empty) with the smallest count in n; ties
// go to the smallest ID.
func leastIn(n map[string]int, candidates []Worker) Worker {
	best := candidates[0]
	for _, w := range candidates[1:] {
		if n[w.ID] < n[best.ID] {
			best = w
		}
	}
	return best
}

// reconcile updates owners for a new round given the live workers (sorted by ID). Shards
// whose owner is not live (or that have none yet) go, in shard order, to the live worker
// with the fewest shards (ties: smallest ID); then, while the most and least loaded workers
// differ by more than one shard, the highest-index shard of the most loaded worker (ties:
// smallest ID) moves to the least loaded one. It returns the moves in order: orphans first,
// then rebalancing. With no live worker it changes nothing. The result depends only on the
// owners and the live IDs.
func reconcile(owners []string, live []Worker) (orphans, rebalanced []move) {
	if len(live) == 0 {
		return nil, nil
	}
	n := ownedCounts(owners, live)
	for s, o := range owners {
		if _, ok := n[o]; ok {
			continue
		}
		to := leastIn(n, live)
		orphans = append(orphans, move{shard: s, from: o, to: to.ID})
		owners[s] = to.ID
		n[to.ID]++
	}
	for {
		most, least := live[0].ID, live[0].ID
		for _, w := range live[1:] {
			if n[w.ID] > n[most] {
				most = w.ID
			}
			if n[w.ID] < n[least] {
				least = w.ID
			}
		}
		if n[most]-n[least] <= 1 {
			return orphans, rebalanced
		}
		s := len(owners) - 1
		for owners[s] != most {
			s--
		}
		owners[s] = least
		n[most]--
		n[least]++
		rebalanced = append(rebalanced, move{shard: s, from: most, to: least})
	}
}
