// Package integration runs gpreduce as real processes on loopback: coordinators (`coordinator
// serve`) forming a raft cluster, workers (`worker serve`), and the command-line client. The
// tests kill processes with SIGKILL mid-job and check that jobs still finish with the model
// the single-process engine trains.
package integration

import (
	"compress/gzip"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// bins holds the binaries TestMain builds, and data the generated data sets.
var (
	bins struct{ coordinator, worker string }
	data struct {
		dir string
		// train2d is a gzipped CSV (header a,b,y) of a smooth 2-input function with noise;
		// gzipped so that both the cluster and eval cut it into the same row ranges.
		train2d string
		// test2d holds test rows of the same function, for eval.
		test2d string
	}
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "gpreduce-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for _, b := range []struct {
		dst *string
		pkg string
	}{{&bins.coordinator, "coordinator"}, {&bins.worker, "worker"}} {
		*b.dst = filepath.Join(dir, b.pkg)
		cmd := exec.Command("go", "build", "-o", *b.dst, "github.com/gpreduce/gpreduce/cmd/"+b.pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build cmd/%s: %v\n%s", b.pkg, err, out)
			return 1
		}
	}
	data.dir = filepath.Join(dir, "data")
	if err := os.MkdirAll(data.dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	data.train2d = filepath.Join(data.dir, "train2d.csv.gz")
	data.test2d = filepath.Join(data.dir, "test2d.csv")
	if err := writeGzip(data.train2d, rows2d(4000, 1)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.WriteFile(data.test2d, []byte(rows2d(200, 2)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// rows2d returns n rows "a,b,y" (with a header) of y = sin(3a) + cos(2b)/2 + noise, the
// inputs and noise from a fixed linear congruential sequence.
func rows2d(n int, seed uint64) string {
	s := seed*0x9E3779B97F4A7C15 + 1
	u := func() float64 {
		s = s*6364136223846793005 + 1442695040888963407
		return float64(s>>11) / (1 << 53)
	}
	var b strings.Builder
	b.WriteString("a,b,y\n")
	for i := 0; i < n; i++ {
		a, c := 4*u()-2, 4*u()-2
		noise := 0.1 * math.Sqrt(-2*math.Log(1-u())) * math.Cos(2*math.Pi*u())
		y := math.Sin(3*a) + 0.5*math.Cos(2*c) + noise
		for j, v := range []float64{a, c, y} {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func writeGzip(path, body string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	if _, err := zw.Write([]byte(body)); err != nil {
		f.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
