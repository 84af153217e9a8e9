package cli

import (
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpreduce/gpreduce/internal/shard"
)

// TestPredictRefusesDamagedModel: a model file with 16 bytes overwritten is refused by
// predict with an error saying it is damaged; the intact file predicts.
func TestPredictRefusesDamagedModel(t *testing.T) {
	dir := t.TempDir()
	tr := writeCSV(t, dir, "train.csv", 200, 0)
	te := writeCSV(t, dir, "test.csv", 5, 500)
	x := filepath.Join(dir, "x.csv")
	if err := os.WriteFile(x, []byte("a,b\n0.1,0.2\n-0.3,0.4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mpath := filepath.Join(dir, "m.gpm")
	if code, _, errOut := run(t, "eval", "--method", "gl", "--train", tr, "--test", te, "--header", "--target", "y",
		"--lengthscale-bounds", "0.5,1.5", "--nodes-per-dim", "10,10", "--max-iter", "10", "--model-out", mpath, "--json"); code != 0 {
		t.Fatalf("eval exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	preds := filepath.Join(dir, "preds.csv")
	if code, _, errOut := run(t, "predict", "--model", mpath, "--data", x, "--header", "--out", preds); code != 0 {
		t.Fatalf("predict with the intact model: exit %d: %s", code, errOut)
	}
	for _, off := range []int{len(b) / 3, len(b) / 2, len(b) - 16} {
		c := append([]byte(nil), b...)
		copy(c[off:], "overwritten-bits")
		bad := filepath.Join(dir, "bad.gpm")
		if err := os.WriteFile(bad, c, 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := run(t, "predict", "--model", bad, "--data", x, "--header", "--out", preds)
		if code != 1 || !strings.Contains(errOut, "bad.gpm") || !strings.Contains(errOut, "damaged") {
			t.Errorf("16 bytes overwritten at %d: exit %d: %s", off, code, errOut)
		}
	}
}

// TestAccessFlags: the data access flags of serve and worker serve build a confined
// reader (the working directory by default) and reject bad values.
func TestAccessFlags(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	wd, err = filepath.EvalSymlinks(wd)
	if err != nil {
		t.Fatal(err)
	}
	var f accessFlags
	cmd := &cobra.Command{}
	f.register(cmd)
	if err := cmd.Flags().Parse(nil); err != nil {
		t.Fatal(err)
	}
	r, err := f.reader()
	if err != nil {
		t.Fatal(err)
	}
	if !r.Access.Confined || len(r.Access.Roots) != 1 || r.Access.Roots[0] != wd || len(r.Access.URLs) != 0 || r.Access.AllowPrivate {
		t.Errorf("default access %+v, want the working directory %s alone", r.Access, wd)
	}
	if r.Limits.MaxLineBytes != shard.DefaultMaxLineBytes || r.Limits.MaxFields != shard.DefaultMaxFields || r.Limits.ReadTimeout != shard.DefaultReadTimeout {
		t.Errorf("default limits %+v", r.Limits)
	}
	dir := t.TempDir()
	for _, bad := range []struct {
		f    accessFlags
		want string
	}{
		{accessFlags{roots: []string{filepath.Join(dir, "nope")}, maxLine: "1MiB", maxFields: 1, readTimeout: 1}, "--data-root"},
		{accessFlags{urls: []string{"ftp://x/"}, maxLine: "1MiB", maxFields: 1, readTimeout: 1}, "http or https"},
		{accessFlags{maxLine: "lots", maxFields: 1, readTimeout: 1}, "--max-line-bytes"},
		{accessFlags{maxLine: "2GiB", maxFields: 1, readTimeout: 1}, "--max-line-bytes"},
		{accessFlags{maxLine: "1MiB", maxFields: 0, readTimeout: 1}, "--max-fields"},
		{accessFlags{maxLine: "1MiB", maxFields: 1, readTimeout: 0}, "--read-timeout"},
	} {
		if _, err := bad.f.reader(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want an error mentioning %s", bad.f, err, bad.want)
		}
	}
	// The commands take the flags.
	code, _, errOut := run(t, "serve", "--id", "c", "--data-dir", t.TempDir(), "--data-root", filepath.Join(dir, "nope"))
	if code != ExitNotFound || !strings.Contains(errOut, "--data-root") {
		t.Errorf("serve with a missing data root: exit %d: %s", code, errOut)
	}
}

// TestImportCommand: import turns a gzipped CSV into plain CSV that eval reads to the same
// rows, and a bad input leaves no output.
func TestImportCommand(t *testing.T) {
	dir := t.TempDir()
	gz := filepath.Join(dir, "in.csv.gz")
	zf, err := os.Create(gz)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(zf)
	zw.Write([]byte("id,a,y\nr1,0.1,1e-3\nr2,0.30000000000000004,2\n"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zf.Close()
	out := filepath.Join(dir, "out.csv")
	code, stdout, errOut := run(t, "import", gz, out, "--header", "--target", "y", "--columns", "a")
	if code != 0 || !strings.Contains(stdout, "imported 2 rows") {
		t.Fatalf("import: exit %d: %s%s", code, stdout, errOut)
	}
	b, err := os.ReadFile(out)
	if err != nil || string(b) != "\"a\",\"y\"\n0.1,0.001\n0.30000000000000004,2\n" {
		t.Fatalf("output %q, %v", b, err)
	}
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("a,y\n1,2\n3,oops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(dir, "out2.csv")
	code, _, errOut = run(t, "import", bad, out2, "--header")
	if code != 1 || !strings.Contains(errOut, "bad.csv:3:2") {
		t.Errorf("bad input: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(out2); err == nil {
		t.Error("a failed import left its output")
	}
	if _, err := os.Stat(out2 + ".tmp"); err == nil {
		t.Error("a failed import left its temporary file")
	}
	if code, _, errOut := run(t, "import", bad, bad, "--header"); code != 1 || !strings.Contains(errOut, "is the input") {
		t.Errorf("import onto its input: exit %d: %s", code, errOut)
	}
}
