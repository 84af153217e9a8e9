package integration

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// soakEnv turns the soak tests on: they run hundreds of jobs and take many minutes.
const soakEnv = "GPREDUCE_SOAK"

// soakJob is a small gl job on the 2-input data: 12 x 12 nodes (144 features, so a
// checkpoint of about 170 KB every 200 ms), a model of about 170 KB.
// The upper lengthscale bound varies with i so that every job trains a different model (the
// coordinators would store equal models once).
func soakJob(i int) []string {
	return []string{"--method", "gl", "--nodes-per-dim", "12,12", "--max-iter", "25",
		"--lengthscale-bounds", "0.3," + strconv.FormatFloat(2+0.001*float64(i), 'f', -1, 64),
		"--data", data.train2d, "--header", "--target", "y", "--columns", "a,b", "--shards", "2"}
}

// runJobs submits jobs from..to-1 (IDs s<from>...), at most par at a time, and waits until
// each has succeeded.
func (c *cluster) runJobs(from, to, par int) {
	c.t.Helper()
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	errs := make(chan error, to-from)
	for i := from; i < to; i++ {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			id := fmt.Sprintf("s%04d", i)
			_, errOut, err := c.client(append([]string{"submit", "--id", id, "--wait", "--json"}, soakJob(i)...)...)
			if err != nil && strings.Contains(errOut, "already exists") {
				// The submission was retried after its answer was lost (an overloaded
				// machine, a leadership hiccup) and the first attempt had gone through.
				_, errOut, err = c.client("logs", id)
			}
			if err == nil {
				var s jobStatus
				if s, err = c.status(id); err == nil && s.State != "succeeded" {
					err = fmt.Errorf("job %s", s.State)
				}
			}
			if err != nil {
				errs <- fmt.Errorf("job %s: %v: %s", id, err, tail(errOut, 5))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		c.t.Fatal(err)
	}
}

// dirBytes is the total size of the files under dir.
func dirBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// memory returns a process's resident set size and its peak, in bytes, from /proc.
func (p *proc) memory(t testing.TB) (rss, peak int64) {
	t.Helper()
	p.mu.Lock()
	pid := p.cmd.Process.Pid
	p.mu.Unlock()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak
}

// footprint logs and returns each coordinator's data directory size, and checks their peak
// memory against maxMem.
func (c *cluster) footprint(what string, maxMem int64) []int64 {
	c.t.Helper()
	var sizes []int64
	for _, co := range c.coords {
		size := dirBytes(c.t, co.dataDir)
		rss, peak := co.proc.memory(c.t)
		raftDB, _ := os.Stat(filepath.Join(co.dataDir, "raft.db"))
		c.t.Logf("%s %s: data dir %.1f MB (raft.db %.1f MB, blobs %.1f MB), RSS %.0f MB, peak RSS %.0f MB", what, co.id,
			mb(size), mb(raftDB.Size()), mb(dirBytes(c.t, filepath.Join(co.dataDir, "blobs"))), mb(rss), mb(peak))
		if peak > maxMem {
			c.t.Errorf("%s: %s peaked at %.0f MB of memory, over %.0f MB", what, co.id, mb(peak), mb(maxMem))
		}
		sizes = append(sizes, size)
	}
	return sizes
}

func mb(n int64) float64 { return float64(n) / 1e6 }

// countJobs returns the number of jobs the cluster lists.
func (c *cluster) countJobs() int {
	c.t.Helper()
	var jobs []json.RawMessage
	if err := json.Unmarshal([]byte(c.mustClient("jobs", "--json")), &jobs); err != nil {
		c.t.Fatal(err)
	}
	return len(jobs)
}

// TestSoakBoundedState (GPREDUCE_SOAK=1): 240 small jobs on 3 coordinators and 3 workers
// leave each coordinator's data directory under 100 MB and its memory under 500 MB; with
// --retain-jobs 10, 100 jobs leave it under 50 MB and the next 100 do not grow it.
func TestSoakBoundedState(t *testing.T) {
	if os.Getenv(soakEnv) != "1" {
		t.Skipf("set %s=1 to run the soak tests (hundreds of jobs, many minutes)", soakEnv)
	}
	t.Run("240 jobs", func(t *testing.T) {
		c := newCluster(t, 3)
		c.startWorkers(3)
		t0 := time.Now()
		c.runJobs(0, 240, 6)
		t.Logf("240 jobs in %s", time.Since(t0).Round(time.Second))
		time.Sleep(5 * time.Second) // let every member apply and snapshot
		for i, size := range c.footprint("after 240 jobs", 500e6) {
			if size > 100e6 {
				t.Errorf("%s: data dir %.1f MB after 240 jobs, over 100 MB", c.coords[i].id, mb(size))
			}
		}
		if n := c.countJobs(); n != 240 {
			t.Errorf("%d jobs listed, want 240", n)
		}
	})
	t.Run("retention 10", func(t *testing.T) {
		c := newClusterWith(t, 3, func(c *cluster) { c.serveFlags = []string{"--retain-jobs", "10"} })
		c.startWorkers(3)
		c.runJobs(0, 100, 6)
		time.Sleep(5 * time.Second)
		first := c.footprint("after 100 jobs (retention 10)", 500e6)
		c.runJobs(100, 200, 6)
		time.Sleep(5 * time.Second)
		second := c.footprint("after 200 jobs (retention 10)", 500e6)
		for i := range first {
			if first[i] > 50e6 || second[i] > 50e6 {
				t.Errorf("%s: data dir %.1f MB after 100 jobs and %.1f MB after 200, over 50 MB", c.coords[i].id, mb(first[i]), mb(second[i]))
			}
			// Flat: the second 100 jobs may move it by what one snapshot and the log's
			// high-water mark can, not by their models.
			if second[i] > first[i]+10e6 {
				t.Errorf("%s: data dir grew from %.1f MB to %.1f MB over the second 100 jobs", c.coords[i].id, mb(first[i]), mb(second[i]))
			}
		}
		eventually(t, time.Minute, "retention keeps 10 jobs", func() error {
			if n := c.countJobs(); n != 10 {
				return fmt.Errorf("%d jobs listed", n)
			}
			return nil
		})
	})
}
