package shard

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestSplitHead: the ranges SplitHead cuts for the first rows data rows of a file read, with
// ReadRange, exactly those rows, cut exactly as SplitRanges cuts a file holding only the
// lines before the next data row.
func TestSplitHead(t *testing.T) {
	var b strings.Builder
	b.WriteString("\nx,y\n")
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&b, "%d.5,%d\n", i, i*i%17)
		if i%37 == 0 {
			b.WriteString("\n  \n")
		}
	}
	content := b.String()
	for _, header := range []bool{true, false} {
		in := content
		if !header {
			in = strings.Replace(content, "x,y\n", "", 1)
		}
		path := writeFile(t, "h.csv", in)
		opts := CSVOptions{Header: header}
		all, err := ReadCSV(strings.NewReader(in), path, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, rows := range []int{1, 2, 37, 150, 199} {
			for _, k := range []int{1, 2, 3, 8, 64} {
				refs, err := SplitHead(path, opts, rows, k)
				if err != nil {
					t.Fatalf("header %v, %d rows, k %d: %v", header, rows, k, err)
				}
				var tabs []*Table
				for _, ref := range refs {
					tab, err := ReadRange(path, ref, opts)
					if err != nil {
						t.Fatal(err)
					}
					tabs = append(tabs, tab)
				}
				if diff := equalTables(concat(tabs), all.Slice(0, rows)); diff != "" {
					t.Fatalf("header %v, %d rows, k %d: %s", header, rows, k, diff)
				}
				end := refs[len(refs)-1].Offset + refs[len(refs)-1].Length
				head := writeFile(t, "head.csv", in[:end])
				want, err := SplitRanges(head, k)
				if err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if want[i].Offset != refs[i].Offset || want[i].Length != refs[i].Length {
						t.Fatalf("header %v, %d rows, k %d: range %d is %v, SplitRanges of the head cuts %v", header, rows, k, i, refs[i], want[i])
					}
				}
			}
		}
		if _, err := SplitHead(path, opts, all.N(), 2); err == nil || !strings.Contains(err.Error(), "keep rows for testing") {
			t.Errorf("a head of every row: %v", err)
		}
	}
}

// TestLoadAllMatchesPlanLoad: LoadAll's tables are those of Load on each planned shard, for
// byte-range and row-range sources.
func TestLoadAllMatchesPlanLoad(t *testing.T) {
	var b strings.Builder
	b.WriteString("a,b,y\n")
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "%d,%d.25,%d\n", i, i%7, i%11)
	}
	plain := writeFile(t, "p.csv", b.String())
	gz := writeFile(t, "p.csv.gz", b.String())
	ctx := context.Background()
	for _, uri := range []string{plain, gz} {
		src := Source{URI: uri, Header: true, Target: "y"}
		l, tabs, err := Reader{}.LoadAll(ctx, src, 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(tabs) != 4 || len(l.Refs) != 4 || strings.Join(l.Columns, ",") != "a,b" || l.Target != "y" {
			t.Fatalf("%s: %d tables, layout %+v", uri, len(tabs), l)
		}
		for i, ref := range l.Refs {
			want, err := Load(ctx, src, ref)
			if err != nil {
				t.Fatal(err)
			}
			if diff := equalTables(tabs[i], want); diff != "" {
				t.Fatalf("%s shard %d: %s", uri, i, diff)
			}
		}
	}
}
