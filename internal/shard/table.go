package shard

import "fmt"

// Table is a block of rows held in memory: inputs X (row-major, N() rows by D columns) and
// the target Y. Source names where the rows came from, for error messages.
type Table struct {
	Source  string
	Columns []string // names of the D input columns (x<j>, j the 0-based file column, when there is no header)
	Target  string   // name of the target column (y when there is no header)
	D       int
	X       []float64 // len N()*D
	Y       []float64
}

// N is the number of rows.
func (t *Table) N() int { return len(t.Y) }

// Row returns row i of X, sharing storage with the table.
func (t *Table) Row(i int) []float64 { return t.X[i*t.D : (i+1)*t.D] }

// Slice returns rows [lo, hi) as a table sharing storage with t.
func (t *Table) Slice(lo, hi int) *Table {
	return &Table{Source: t.Source, Columns: t.Columns, Target: t.Target, D: t.D,
		X: t.X[lo*t.D : hi*t.D], Y: t.Y[lo:hi]}
}

// Ref identifies one shard of a job: its index in the fixed shard order, where its rows come
// from, and (for byte-range CSV shards) the byte range. Rows is -1 when unknown before reading.
type Ref struct {
	Index  int
	Source string
	Offset int64 // first byte of the range (CSV byte-range shards)
	Length int64 // bytes in the range; 0 for a whole source or an in-memory block
	First  int   // index of the first row within the source, for in-memory blocks
	Rows   int
}

// String describes the shard for messages: its index and its byte range or rows.
func (r Ref) String() string {
	if r.Length > 0 {
		return fmt.Sprintf("shard %d (%s bytes %d-%d)", r.Index, r.Source, r.Offset, r.Offset+r.Length)
	}
	return fmt.Sprintf("shard %d (%s rows %d-%d)", r.Index, r.Source, r.First, r.First+r.Rows)
}

// Partition cuts t into fixed shards of rowsPerShard rows (the last may be shorter). The
// shards share storage with t. The cut depends only on the row count and rowsPerShard,
// never on how many workers run them.
func Partition(t *Table, rowsPerShard int) ([]Ref, []*Table) {
	if rowsPerShard <= 0 {
		rowsPerShard = t.N()
	}
	var refs []Ref
	var tabs []*Table
	for lo := 0; lo < t.N() || (lo == 0 && t.N() == 0); lo += rowsPerShard {
		hi := min(lo+rowsPerShard, t.N())
		refs = append(refs, Ref{Index: len(refs), Source: t.Source, First: lo, Rows: hi - lo})
		tabs = append(tabs, t.Slice(lo, hi))
		if t.N() == 0 {
			break
		}
	}
	return refs, tabs
}

// PartitionCount cuts t into exactly k shards of nearly equal size (k is clamped to [1, N]).
func PartitionCount(t *Table, k int) ([]Ref, []*Table) {
	n := t.N()
	k = max(1, min(k, n))
	per := (n + k - 1) / k
	return Partition(t, per)
}
