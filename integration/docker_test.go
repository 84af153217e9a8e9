package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The container fault suite runs coordinators and workers as containers of the images
// scripts/images.sh builds, on a private Docker network, and breaks them with docker kill,
// network disconnect, pause, restart and scaling. It runs only with GPREDUCE_DOCKER set:
//
//	GPREDUCE_DOCKER=1     every scenario (about 8 minutes, plus 2 to build the images)
//	GPREDUCE_DOCKER=short the leader-kill scenario only (what CI runs where Docker is)
//	GPREDUCE_DOCKER=0     none (scripts/test.sh then leaves it off even where Docker is)
//
// GPREDUCE_DOCKER_IMAGES=PREFIX:TAG uses images built before (PREFIX/coordinator:TAG and
// PREFIX/worker:TAG) instead of building them; GPREDUCE_DOCKER_LOGS=DIR keeps every
// container's log in DIR/SCENARIO/NAME.log.
const (
	dockerEnv       = "GPREDUCE_DOCKER"
	dockerImagesEnv = "GPREDUCE_DOCKER_IMAGES"
	dockerLogsEnv   = "GPREDUCE_DOCKER_LOGS"
	// dockerWorkerTimeout is the coordinators' --worker-timeout in the suite.
	dockerWorkerTimeout = "5s"
)

// dockerMode returns "full" or "short", or skips the test (saying why) when the suite is
// off or Docker is missing.
func dockerMode(t *testing.T) string {
	t.Helper()
	mode := os.Getenv(dockerEnv)
	switch mode {
	case "", "0", "off":
		t.Skipf("container fault suite skipped: set %s=1 (all scenarios) or %s=short (one) to run it", dockerEnv, dockerEnv)
	case "short":
	default:
		mode = "full"
	}
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Skipf("container fault suite skipped: no Docker engine (%v: %s)", err, bytes.TrimSpace(out))
	}
	return mode
}

var suiteImages struct {
	once          sync.Once
	coord, worker string
	err           error
}

// images returns the coordinator and worker images, building them with scripts/images.sh
// once per test binary unless GPREDUCE_DOCKER_IMAGES names built ones.
func images(t *testing.T) (coord, worker string) {
	t.Helper()
	suiteImages.once.Do(func() {
		if ref := os.Getenv(dockerImagesEnv); ref != "" {
			prefix, tag, ok := strings.Cut(ref, ":")
			if !ok {
				suiteImages.err = fmt.Errorf("%s=%q: want PREFIX:TAG", dockerImagesEnv, ref)
				return
			}
			suiteImages.coord, suiteImages.worker = prefix+"/coordinator:"+tag, prefix+"/worker:"+tag
			return
		}
		start := time.Now()
		cmd := exec.Command("bash", filepath.Join("..", "scripts", "images.sh"))
		cmd.Env = append(os.Environ(), "IMAGE_PREFIX=gpreduce-suite", "TAG=suite")
		if out, err := cmd.CombinedOutput(); err != nil {
			suiteImages.err = fmt.Errorf("scripts/images.sh: %v\n%s", err, out)
			return
		}
		suiteImages.coord, suiteImages.worker = "gpreduce-suite/coordinator:suite", "gpreduce-suite/worker:suite"
		t.Logf("built the images in %s", time.Since(start).Round(time.Second))
	})
	if suiteImages.err != nil {
		t.Fatal(suiteImages.err)
	}
	return suiteImages.coord, suiteImages.worker
}

// docker runs the docker command line and returns its combined output.
func docker(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

func mustDocker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := docker(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// container is one coordinator or worker container with a fixed address on the network.
type container struct {
	name  string // the container's name, unique to the test run
	alias string // its DNS name on the network (c0, w3)
	ip    string
}

// dcluster is three coordinators and some workers in containers on a private network.
type dcluster struct {
	t             *testing.T
	prefix        string
	network       string
	subnet        string // the first three octets of the network's /24
	token, join   string
	raftSecret    string
	coordImage    string
	workerImage   string
	dir           string
	coords        []container
	workers       []container
	stoppedWorker map[string]bool
	// down holds the coordinators the test killed or cut off: clients leave them out, as
	// the client Service leaves out unready pods, so that a status call does not wait on a
	// dial to an address that no longer answers.
	down map[string]bool
}

// newDCluster creates the network, starts three coordinators (as the StatefulSet does:
// the same command line for each, c0 bootstrapping an empty cluster, raft addresses by DNS
// name) and n workers, and waits until the coordinators are ready and the workers
// registered.
func newDCluster(t *testing.T, n int) *dcluster {
	t.Helper()
	coordImage, workerImage := images(t)
	// The containers run as user 65532 and read the generated data through a bind mount.
	if err := os.Chmod(filepath.Dir(data.dir), 0o755); err != nil {
		t.Fatal(err)
	}
	d := &dcluster{t: t, prefix: fmt.Sprintf("gpr-%d-%s", os.Getpid(), strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))),
		token: fmt.Sprintf("api-%x", rand.Uint64()), join: fmt.Sprintf("join-%x", rand.Uint64()),
		raftSecret: fmt.Sprintf("raft-%x-%x", rand.Uint64(), rand.Uint64()),
		coordImage: coordImage, workerImage: workerImage, dir: t.TempDir(), stoppedWorker: map[string]bool{}, down: map[string]bool{}}
	d.prefix = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, d.prefix)
	d.network = d.prefix + "-net"
	var err error
	for range 20 { // a free /24 in 172.31.0.0/16
		d.subnet = fmt.Sprintf("172.31.%d", 1+rand.IntN(250))
		if _, err = docker("network", "create", "--subnet", d.subnet+".0/24", d.network); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.cleanup)
	for i := range 3 {
		d.coords = append(d.coords, container{name: fmt.Sprintf("%s-c%d", d.prefix, i), alias: fmt.Sprintf("c%d", i), ip: fmt.Sprintf("%s.%d", d.subnet, 10+i)})
	}
	for i := range d.coords {
		d.runCoordinator(i)
	}
	d.waitCoordinatorsReady(2 * time.Minute)
	d.addWorkers(n)
	return d
}

// apis is every coordinator's API address.
func (d *dcluster) apis() string {
	var a []string
	for _, c := range d.coords {
		a = append(a, c.ip+":7100")
	}
	return strings.Join(a, ",")
}

// liveAPIs is the API address of every coordinator the test has not taken down.
func (d *dcluster) liveAPIs() string {
	var a []string
	for _, c := range d.coords {
		if !d.down[c.name] {
			a = append(a, c.ip+":7100")
		}
	}
	return strings.Join(a, ",")
}

func (d *dcluster) runCoordinator(i int) {
	d.t.Helper()
	c := d.coords[i]
	mustDocker(d.t, "run", "-d", "--name", c.name, "--network", d.network, "--ip", c.ip, "--network-alias", c.alias,
		"--read-only", "-v", c.name+"-data:/data", "-v", data.dir+":"+data.dir+":ro",
		"-e", "GPREDUCE_TOKEN="+d.token, "-e", "GPREDUCE_JOIN_TOKEN="+d.join, "-e", "GPREDUCE_RAFT_SECRET="+d.raftSecret,
		d.coordImage, "serve", "--id", c.alias, "--data-dir", "/data", "--data-root", data.dir,
		"--raft-addr", "0.0.0.0:7000", "--raft-advertise", c.alias+":7000",
		"--api-addr", "0.0.0.0:7100", "--api-advertise", c.ip+":7100",
		"--join", d.apis(), "--bootstrap-id", "c0", "--metrics-addr", "0.0.0.0:9100",
		"--worker-timeout", dockerWorkerTimeout, "--checkpoint-interval", "1s", "--log-level", "info")
}

// addWorkers starts n more workers and waits until the leader lists every running one.
func (d *dcluster) addWorkers(n int) {
	d.t.Helper()
	for range n {
		i := len(d.workers)
		w := container{name: fmt.Sprintf("%s-w%d", d.prefix, i), alias: fmt.Sprintf("w%d", i), ip: fmt.Sprintf("%s.%d", d.subnet, 20+i)}
		mustDocker(d.t, "run", "-d", "--name", w.name, "--network", d.network, "--ip", w.ip, "--network-alias", w.alias,
			"--read-only", "-v", data.dir+":"+data.dir+":ro", "-e", "GPREDUCE_JOIN_TOKEN="+d.join,
			d.workerImage, "serve", "--join", d.apis(), "--listen", "0.0.0.0:7200", "--advertise", w.ip+":7200",
			"--name", w.alias, "--cores", "1", "--cache-size", "256MiB", "--metrics-addr", "0.0.0.0:9200",
			"--drain-timeout", "20s", "--log-level", "info", "--data-root", data.dir)
		d.workers = append(d.workers, w)
	}
	d.waitWorkers(2 * time.Minute)
}

// running is the workers not stopped by the test.
func (d *dcluster) running() []container {
	var ws []container
	for _, w := range d.workers {
		if !d.stoppedWorker[w.name] {
			ws = append(ws, w)
		}
	}
	return ws
}

// waitWorkers waits until the leader's pool is exactly the running workers.
func (d *dcluster) waitWorkers(timeout time.Duration) {
	d.t.Helper()
	var want []string
	for _, w := range d.running() {
		want = append(want, w.ip+":7200")
	}
	slices.Sort(want)
	eventually(d.t, timeout, fmt.Sprintf("the leader's pool to be %v", want), func() error {
		out, errOut, err := d.client("workers", "--json")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		var ws []workerInfo
		if err := json.Unmarshal([]byte(out), &ws); err != nil {
			return err
		}
		var got []string
		for _, w := range ws {
			got = append(got, w.Address)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("pool %v", got)
		}
		return nil
	})
}

// ready GETs /readyz of a container's metrics port.
func ready(ip string, port int) error {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://%s:%d/readyz", ip, port))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return fmt.Errorf("%s: %d %s", ip, resp.StatusCode, strings.TrimSpace(b.String()))
	}
	return nil
}

// waitCoordinatorsReady waits until every coordinator's /readyz answers 200.
func (d *dcluster) waitCoordinatorsReady(timeout time.Duration) {
	d.t.Helper()
	eventually(d.t, timeout, "every coordinator ready", func() error {
		for _, c := range d.coords {
			if err := ready(c.ip, 9100); err != nil {
				return fmt.Errorf("%s: %w", c.alias, err)
			}
		}
		return nil
	})
}

// client runs the coordinator command line on the host against the cluster.
func (d *dcluster) client(args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.coordinator, append(args, "--addr", d.liveAPIs())...)
	cmd.Env = append(os.Environ(), "GPREDUCE_TOKEN="+d.token, "GPREDUCE_ADDR=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

func (d *dcluster) mustClient(args ...string) string {
	d.t.Helper()
	out, errOut, err := d.client(args...)
	if err != nil {
		d.t.Fatalf("coordinator %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

func (d *dcluster) status(id string) (jobStatus, error) {
	out, errOut, err := d.client("status", id, "--json", "--leader-wait", "5s")
	if err != nil {
		return jobStatus{}, fmt.Errorf("%v: %s", err, strings.TrimSpace(errOut))
	}
	var s jobStatus
	err = json.Unmarshal([]byte(out), &s)
	return s, err
}

// leader returns the index of the coordinator that leads.
func (d *dcluster) leader() int {
	d.t.Helper()
	idx := -1
	eventually(d.t, time.Minute, "a leader", func() error {
		out, errOut, err := d.client("members", "--json", "--leader-wait", "5s")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		var ms []member
		if err := json.Unmarshal([]byte(out), &ms); err != nil {
			return err
		}
		for _, m := range ms {
			for i, c := range d.coords {
				if m.Leader && m.ID == c.alias {
					idx = i
					return nil
				}
			}
		}
		return fmt.Errorf("no leader in %+v", ms)
	})
	return idx
}

// waitRunning waits until job id runs at iteration it or later and returns its status.
func (d *dcluster) waitRunning(id string, it int) jobStatus {
	d.t.Helper()
	var s jobStatus
	t0 := time.Now()
	defer func() {
		d.t.Logf("job %s reached iteration %d in %s", id, s.Iteration, time.Since(t0).Round(time.Millisecond))
	}()
	eventually(d.t, 2*time.Minute, fmt.Sprintf("job %s at iteration %d", id, it), func() error {
		var err error
		if s, err = d.status(id); err != nil {
			return err
		}
		if s.terminal() {
			d.t.Fatalf("job %s ended (%s) before iteration %d: make the job longer", id, s.State, it)
		}
		if s.State != "running" || s.Iteration < it {
			return fmt.Errorf("%s at iteration %d", s.State, s.Iteration)
		}
		return nil
	})
	return s
}

// recovered waits until job id has advanced past iteration it (or finished) and returns
// the time since the fault at t0.
func (d *dcluster) recovered(id string, it int, t0 time.Time) time.Duration {
	d.t.Helper()
	eventually(d.t, 5*time.Minute, fmt.Sprintf("job %s to progress past iteration %d", id, it), func() error {
		s, err := d.status(id)
		if err != nil {
			return err
		}
		if s.State == "succeeded" || (s.State == "running" && s.Iteration > it) {
			d.t.Logf("job %s %s at iteration %d, %s after the fault", id, s.State, s.Iteration, time.Since(t0).Round(time.Millisecond))
			return nil
		}
		if s.terminal() {
			d.t.Fatalf("job %s %s: %s", id, s.State, s.Error)
		}
		return fmt.Errorf("%s at iteration %d", s.State, s.Iteration)
	})
	return time.Since(t0)
}

// finish waits for the jobs, checks that each succeeded with the model eval trains on the
// same shards, and that the cluster lists exactly these jobs, each once.
func (d *dcluster) finish(jobs map[string]job) {
	d.t.Helper()
	for id, j := range jobs {
		var s jobStatus
		waitStart := time.Now()
		eventually(d.t, 5*time.Minute, "job "+id+" to finish", func() error {
			var err error
			if s, err = d.status(id); err != nil {
				return err
			}
			if !s.terminal() {
				return fmt.Errorf("%s at iteration %d", s.State, s.Iteration)
			}
			return nil
		})
		if s.State != "succeeded" {
			d.t.Fatalf("job %s: %s: %s", id, s.State, s.Error)
		}
		d.t.Logf("job %s succeeded after %d iterations (waited %s)", id, s.Iteration, time.Since(waitStart).Round(time.Millisecond))
		p := filepath.Join(d.dir, id+".gpm")
		d.mustClient("model", id, "--out", p)
		got, err := os.ReadFile(p)
		if err != nil {
			d.t.Fatal(err)
		}
		t0 := time.Now()
		want := j.local(d.t)
		if dt := time.Since(t0); dt > time.Second {
			d.t.Logf("coordinator eval of the job took %s", dt.Round(time.Millisecond))
		}
		sameModel(d.t, id, got, want)
		if bytes.Equal(got, want) {
			d.t.Logf("job %s: model byte-identical to coordinator eval (%d bytes)", id, len(got))
		}
	}
	var listed []jobStatus
	if err := json.Unmarshal([]byte(d.mustClient("jobs", "--json")), &listed); err != nil {
		d.t.Fatal(err)
	}
	var ids []string
	for _, s := range listed {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	var want []string
	for id := range jobs {
		want = append(want, id)
	}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		d.t.Errorf("the cluster lists jobs %v, want exactly %v (none lost, none twice)", ids, want)
	}
}

// disconnect cuts a container off the network; reconnect puts it back at its address.
func (d *dcluster) disconnect(c container) {
	mustDocker(d.t, "network", "disconnect", d.network, c.name)
}

func (d *dcluster) reconnect(c container) {
	mustDocker(d.t, "network", "connect", "--ip", c.ip, "--alias", c.alias, d.network, c.name)
}

// pause freezes a container's processes. runc's cgroup v1 freezer sometimes gives up
// ("unable to freeze") when a process is busy at that instant; the pause is then tried
// again, a few times.
func (d *dcluster) pause(c container) {
	d.t.Helper()
	var err error
	for try := range 5 {
		if _, err = docker("pause", c.name); err == nil {
			return
		}
		d.t.Logf("docker pause %s, try %d: %v", c.alias, try+1, err)
		time.Sleep(200 * time.Millisecond)
	}
	d.t.Fatal(err)
}

// cleanup removes the containers, their volumes and the network, logging the end of every
// container's log if the test failed.
func (d *dcluster) cleanup() {
	all := append(append([]container{}, d.coords...), d.workers...)
	if dir := os.Getenv(dockerLogsEnv); dir != "" {
		dir = filepath.Join(dir, d.prefix)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			d.t.Error(err)
		}
		for _, c := range all {
			out, _ := docker("logs", "-t", c.name)
			if err := os.WriteFile(filepath.Join(dir, c.alias+".log"), []byte(out), 0o644); err != nil {
				d.t.Error(err)
			}
		}
		d.t.Logf("container logs in %s", dir)
	}
	if d.t.Failed() {
		for _, c := range all {
			out, _ := docker("logs", "--tail", "30", c.name)
			d.t.Logf("--- last lines of %s:\n%s", c.alias, out)
		}
	}
	var names, volumes []string
	for _, c := range all {
		names = append(names, c.name)
	}
	for _, c := range d.coords {
		volumes = append(volumes, c.name+"-data")
	}
	if len(names) > 0 {
		docker(append([]string{"rm", "-f", "-v"}, names...)...)
	}
	docker(append([]string{"volume", "rm", "-f"}, volumes...)...)
	docker("network", "rm", d.network)
}

// dockerJob is the suite's training job: random Fourier features, a map round over the
// workers at every objective evaluation, so that faults land mid-round.
func dockerJob() job {
	j := rff2d()
	j.spec = []string{"--method", "rff", "--features", "256", "--lengthscale-bounds", "0.2,2", "--max-iter", "50", "--seed", "11"}
	return j
}

// TestContainerFaults runs the fault scenarios. Each starts a fresh cluster of three
// coordinator and three worker containers, submits jobs, injects its fault mid-job, prints
// the time until the jobs progress again, and checks that every job finishes with the model
// `coordinator eval` trains on the same shards, and that no job is lost or listed twice.
func TestContainerFaults(t *testing.T) {
	mode := dockerMode(t)
	images(t)
	type scenario struct {
		name  string
		short bool
		run   func(t *testing.T, d *dcluster) time.Duration
	}
	recoveries := map[string]time.Duration{}
	var mu sync.Mutex
	for _, sc := range []scenario{
		{"kill-leader", true, func(t *testing.T, d *dcluster) time.Duration {
			id := d.submitJob("kill-leader")
			s := d.waitRunning(id, 3)
			l := d.leader()
			t0 := time.Now()
			mustDocker(t, "kill", d.coords[l].name)
			d.down[d.coords[l].name] = true
			t.Logf("docker kill %s (leader) at iteration %d", d.coords[l].alias, s.Iteration)
			rec := d.recovered(id, s.Iteration, t0)
			d.finish(map[string]job{id: dockerJob()})
			mustDocker(t, "start", d.coords[l].name) // it restarts with its data and rejoins
			delete(d.down, d.coords[l].name)
			d.waitCoordinatorsReady(2 * time.Minute)
			return rec
		}},
		{"partition-leader-30s", false, func(t *testing.T, d *dcluster) time.Duration {
			id := d.submitJob("partition")
			s := d.waitRunning(id, 3)
			l := d.leader()
			t0 := time.Now()
			d.disconnect(d.coords[l])
			d.down[d.coords[l].name] = true
			t.Logf("network disconnect %s (leader) at iteration %d", d.coords[l].alias, s.Iteration)
			rec := d.recovered(id, s.Iteration, t0)
			time.Sleep(time.Until(t0.Add(30 * time.Second))) // the partition lasts 30 s
			d.reconnect(d.coords[l])
			delete(d.down, d.coords[l].name)
			t.Logf("reconnected %s after %s", d.coords[l].alias, time.Since(t0).Round(time.Second))
			d.finish(map[string]job{id: dockerJob()})
			d.waitCoordinatorsReady(2 * time.Minute)
			return rec
		}},
		{"disconnect-worker", false, func(t *testing.T, d *dcluster) time.Duration {
			id := d.submitJob("worker-cut")
			s := d.waitRunning(id, 3)
			w := d.workers[1]
			t0 := time.Now()
			d.disconnect(w)
			t.Logf("network disconnect %s at iteration %d", w.alias, s.Iteration)
			rec := d.recovered(id, s.Iteration, t0)
			d.finish(map[string]job{id: dockerJob()})
			d.reconnect(w)
			d.waitWorkers(2 * time.Minute) // it registers again
			return rec
		}},
		{"pause-worker-60s", false, func(t *testing.T, d *dcluster) time.Duration {
			id := d.submitJob("worker-pause")
			s := d.waitRunning(id, 3)
			w := d.workers[0]
			t0 := time.Now()
			d.pause(w)
			t.Logf("docker pause %s at iteration %d", w.alias, s.Iteration)
			rec := d.recovered(id, s.Iteration, t0)
			time.Sleep(time.Until(t0.Add(60 * time.Second))) // hung for 60 s
			mustDocker(t, "unpause", w.name)
			d.finish(map[string]job{id: dockerJob()})
			d.waitWorkers(2 * time.Minute)
			return rec
		}},
		{"restart-all-coordinators", false, func(t *testing.T, d *dcluster) time.Duration {
			a := d.submitJob("restart-a")
			b := d.submitJob("restart-b")
			s := d.waitRunning(a, 3)
			var names []string
			for _, c := range d.coords {
				names = append(names, c.name)
			}
			t0 := time.Now()
			mustDocker(t, append([]string{"restart", "-t", "10"}, names...)...)
			t.Logf("docker restart of every coordinator at iteration %d of %s (took %s)", s.Iteration, a, time.Since(t0).Round(time.Second))
			rec := d.recovered(a, s.Iteration, t0)
			d.finish(map[string]job{a: dockerJob(), b: dockerJob()})
			d.waitCoordinatorsReady(2 * time.Minute)
			return rec
		}},
		{"scale-workers-3-6-2", false, func(t *testing.T, d *dcluster) time.Duration {
			id := d.submitJob("scale")
			s := d.waitRunning(id, 3)
			t0 := time.Now()
			d.addWorkers(3)
			t.Logf("scaled 3 -> 6 workers at iteration %d in %s", s.Iteration, time.Since(t0).Round(time.Millisecond))
			up := d.recovered(id, s.Iteration, t0)
			s2, err := d.status(id)
			if err != nil {
				t.Fatal(err)
			}
			if s2.terminal() {
				t.Logf("the job finished before the scale-down")
			}
			// Scale down as the HPA does: SIGTERM (docker stop) to four workers at once.
			t1 := time.Now()
			var wg sync.WaitGroup
			for _, w := range d.workers[1:5] {
				d.stoppedWorker[w.name] = true
				wg.Go(func() { docker("stop", "-t", "30", w.name) })
			}
			wg.Wait()
			t.Logf("scaled 6 -> 2 workers (docker stop) at iteration %d, the stops took %s", s2.Iteration, time.Since(t1).Round(time.Millisecond))
			down := d.recovered(id, s2.Iteration, t1)
			d.finish(map[string]job{id: dockerJob()})
			d.waitWorkers(2 * time.Minute)
			t.Logf("recovery: scale-up %s, scale-down %s", up.Round(time.Millisecond), down.Round(time.Millisecond))
			return max(up, down)
		}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			if mode == "short" && !sc.short {
				t.Skipf("%s=short: only the short scenarios run", dockerEnv)
			}
			start := time.Now()
			d := newDCluster(t, 3)
			t.Logf("cluster of 3 coordinators and 3 workers up in %s", time.Since(start).Round(time.Millisecond))
			rec := sc.run(t, d)
			t.Logf("RECOVERY %s: %s (scenario took %s)", sc.name, rec.Round(time.Millisecond), time.Since(start).Round(time.Second))
			mu.Lock()
			recoveries[sc.name] = rec
			mu.Unlock()
		})
	}
	for name, rec := range recoveries {
		t.Logf("recovery time %-26s %s", name, rec.Round(time.Millisecond))
	}
}

// submitJob submits the suite's job with the given ID.
func (d *dcluster) submitJob(id string) string {
	d.t.Helper()
	out := d.mustClient(append([]string{"submit", "--id", id}, dockerJob().submitArgs()...)...)
	if got := strings.TrimSpace(out); got != id {
		d.t.Fatalf("submit printed %q, want %q", out, id)
	}
	return id
}
