package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpreduce/gpreduce/internal/testutil"
)

// Timings for loopback: raft elections in well under a second, workers dropped 1.5 s after
// their last heartbeat.
var serveTuning = []string{
	"--raft-heartbeat-timeout", "300ms", "--raft-election-timeout", "300ms", "--raft-leader-lease-timeout", "150ms",
	"--worker-timeout", "1500ms", "--checkpoint-interval", "200ms",
}

// proc is a process the test started: a coordinator, a worker or a client run in the
// background. Its output goes to a log file.
type proc struct {
	name    string
	bin     string
	args    []string
	env     []string
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

func (p *proc) start(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), filepath.Base(p.bin), strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", p.name, err)
	}
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(exited)
	}()
}

// running reports whether the process was started and has not exited.
func (p *proc) running() bool {
	p.mu.Lock()
	ch := p.exited
	p.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to exit.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, ch := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-ch
}

// stop sends SIGTERM and waits up to 15 s, then kills.
func (p *proc) stop() {
	p.mu.Lock()
	cmd, ch := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ch:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-ch
	}
}

// wait waits for the process to exit and returns its error.
func (p *proc) wait(timeout time.Duration) (error, bool) {
	select {
	case <-p.exited:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.err, true
	case <-time.After(timeout):
		return nil, false
	}
}

func (p *proc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// coord is one coordinator: its fixed addresses and data directory survive restarts.
type coord struct {
	id, raftAddr, apiAddr, dataDir string
	proc                           *proc
}

// cluster is a set of coordinator and worker processes sharing tokens.
type cluster struct {
	t             *testing.T
	dir           string
	token         string
	tokenFile     string
	joinTokenFile string
	// raftSecretFile holds the members' raft secret.
	raftSecretFile string
	coords         []*coord
	workers        []*proc
	all            []*proc
	// Extra flags of every coordinator, worker and client (TLS).
	serveFlags, workerFlags, clientFlags []string
}

// newCluster starts n coordinators (the first bootstraps, the others join it) and waits until
// all are members with a leader.
func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	return newClusterWith(t, n, func(*cluster) {})
}

// newClusterWith is newCluster with a hook that can set the extra flags before anything
// starts.
func newClusterWith(t *testing.T, n int, setup func(*cluster)) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), token: "api-" + t.Name()}
	setup(c)
	c.tokenFile = c.writeFile("token", c.token+"\n")
	c.joinTokenFile = c.writeFile("join-token", "join-"+t.Name()+"\n")
	c.raftSecretFile = c.writeFile("raft-secret", "raft-secret-"+t.Name()+"\n")
	t.Cleanup(c.cleanup)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("c%d", i)
		co := &coord{id: id, raftAddr: freeAddr(t), apiAddr: freeAddr(t), dataDir: filepath.Join(c.dir, id)}
		co.proc = &proc{name: id, bin: bins.coordinator, logPath: filepath.Join(c.dir, id+".log")}
		c.coords = append(c.coords, co)
		c.all = append(c.all, co.proc)
		if i == 0 {
			c.startCoordinator(0, "--bootstrap")
			c.waitMembers(1)
		} else {
			c.startCoordinator(i, "--join", c.coords[0].apiAddr)
		}
	}
	c.waitMembers(n)
	return c
}

func (c *cluster) writeFile(name, body string) string {
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// startCoordinator starts (or restarts) coordinator i with extra flags.
func (c *cluster) startCoordinator(i int, extra ...string) {
	co := c.coords[i]
	args := append([]string{"serve", "--id", co.id, "--raft-addr", co.raftAddr, "--api-addr", co.apiAddr,
		"--data-dir", co.dataDir, "--token-file", c.tokenFile, "--join-token-file", c.joinTokenFile, "--raft-secret-file", c.raftSecretFile,
		"--log-level", "debug"},
		serveTuning...)
	args = append(append(args, dataAccessFlags()...), c.serveFlags...)
	co.proc.args = append(args, extra...)
	co.proc.start(c.t)
}

// startWorker starts a worker joining every coordinator with the join token in tokenFile.
func (c *cluster) startWorker(name, tokenFile string) *proc {
	c.t.Helper()
	var apis []string
	for _, co := range c.coords {
		apis = append(apis, co.apiAddr)
	}
	p := &proc{name: name, bin: bins.worker, logPath: filepath.Join(c.dir, name+".log"),
		args: []string{"serve", "--join", strings.Join(apis, ","), "--listen", freeAddr(c.t), "--name", name,
			"--cores", "1", "--join-token-file", tokenFile, "--cache-size", "256MiB", "--log-level", "debug"}}
	p.args = append(append(p.args, dataAccessFlags()...), c.workerFlags...)
	p.start(c.t)
	c.workers = append(c.workers, p)
	c.all = append(c.all, p)
	return p
}

// startWorkers starts n workers with the right join token and waits until the leader lists
// them all.
func (c *cluster) startWorkers(n int) {
	for i := 0; i < n; i++ {
		c.startWorker(fmt.Sprintf("w%d", len(c.workers)), c.joinTokenFile)
	}
	c.waitWorkers(len(c.workers))
}

// addrs is the --addr of every coordinator.
func (c *cluster) addrs() string {
	var a []string
	for _, co := range c.coords {
		a = append(a, co.apiAddr)
	}
	return strings.Join(a, ",")
}

// clientWaitLimit bounds a `submit --wait` run by the tests: the job's own time on a loaded
// machine, leader changes included, with a wide margin.
const clientWaitLimit = 10 * time.Minute

// clientLimit is the time limit of a client command line: query for a query, clientWaitLimit
// when it waits for a job (--wait).
func clientLimit(args []string, query time.Duration) time.Duration {
	if slices.Contains(args, "--wait") {
		return clientWaitLimit
	}
	return query
}

// client runs the coordinator command line against the cluster with the API token and
// returns stdout, stderr and the error (an *exec.ExitError for a non-zero exit).
func (c *cluster) client(args ...string) (string, string, error) {
	return c.clientEnv([]string{"GPREDUCE_TOKEN=" + c.token}, args...)
}

// clientEnv is client with env added to the command's environment. Its time limit only stops
// a hung client: 2 minutes for a query, clientWaitLimit for `submit --wait`, which lasts as
// long as its job.
func (c *cluster) clientEnv(env []string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), clientLimit(args, 2*time.Minute))
	defer cancel()
	args = append(append(args, "--addr", c.addrs()), c.clientFlags...)
	cmd := exec.CommandContext(ctx, bins.coordinator, args...)
	cmd.Env = append(os.Environ(), "GPREDUCE_TOKEN=", "GPREDUCE_ADDR=")
	cmd.Env = append(cmd.Env, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

// mustClient is client that fails the test on a non-zero exit.
func (c *cluster) mustClient(args ...string) string {
	c.t.Helper()
	out, errOut, err := c.client(args...)
	if err != nil {
		c.t.Fatalf("coordinator %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

type member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_address"`
	APIAddr  string `json:"api_address"`
	Leader   bool   `json:"leader"`
}

// members lists the members through the client, or returns an error.
func (c *cluster) members() ([]member, error) {
	out, errOut, err := c.client("members", "--json", "--leader-wait", "2s")
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, errOut)
	}
	var ms []member
	if err := json.Unmarshal([]byte(out), &ms); err != nil {
		return nil, fmt.Errorf("members --json: %v: %q", err, out)
	}
	return ms, nil
}

// waitMembers waits until n members are listed, each with its API address, and one leads.
func (c *cluster) waitMembers(n int) {
	c.t.Helper()
	eventually(c.t, 30*time.Second, fmt.Sprintf("%d members with a leader", n), func() error {
		ms, err := c.members()
		if err != nil {
			return err
		}
		leaders := 0
		for _, m := range ms {
			if m.APIAddr == "" {
				return fmt.Errorf("member %s has no API address yet", m.ID)
			}
			if m.Leader {
				leaders++
			}
		}
		if len(ms) != n || leaders != 1 {
			return fmt.Errorf("%d members, %d leaders: %+v", len(ms), leaders, ms)
		}
		return nil
	})
}

// leader returns the index of the leading coordinator.
func (c *cluster) leader() int {
	c.t.Helper()
	var idx int
	eventually(c.t, 30*time.Second, "a leader", func() error {
		ms, err := c.members()
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.Leader {
				for i, co := range c.coords {
					if co.id == m.ID && co.proc.running() {
						idx = i
						return nil
					}
				}
			}
		}
		return fmt.Errorf("no live leader in %+v", ms)
	})
	return idx
}

type workerInfo struct {
	ID      string `json:"id"`
	Address string `json:"address"`
}

func (c *cluster) listWorkers() ([]workerInfo, error) {
	out, errOut, err := c.client("workers", "--json", "--leader-wait", "2s")
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, errOut)
	}
	var ws []workerInfo
	if err := json.Unmarshal([]byte(out), &ws); err != nil {
		return nil, fmt.Errorf("workers --json: %v: %q", err, out)
	}
	return ws, nil
}

// waitWorkers waits until the leader lists n workers.
func (c *cluster) waitWorkers(n int) {
	c.t.Helper()
	eventually(c.t, 30*time.Second, fmt.Sprintf("%d workers", n), func() error {
		ws, err := c.listWorkers()
		if err != nil {
			return err
		}
		if len(ws) != n {
			return fmt.Errorf("%d workers: %+v", len(ws), ws)
		}
		return nil
	})
}

// jobStatus is what status --json prints.
type jobStatus struct {
	ID              string  `json:"id"`
	State           string  `json:"state"`
	Error           string  `json:"error"`
	Iteration       int     `json:"iteration"`
	Objective       float64 `json:"objective"`
	Hyperparameters *struct {
		Lengthscales   []float64 `json:"lengthscales"`
		SignalVariance float64   `json:"signal_variance"`
		NoiseVariance  float64   `json:"noise_variance"`
	} `json:"hyperparameters"`
	Metrics *struct {
		NTrain     int64 `json:"n_train"`
		ModelBytes int64 `json:"model_bytes"`
	} `json:"metrics"`
}

func (s jobStatus) terminal() bool {
	return s.State == "succeeded" || s.State == "failed" || s.State == "canceled"
}

func (c *cluster) status(id string) (jobStatus, error) {
	out, errOut, err := c.client("status", id, "--json")
	if err != nil {
		return jobStatus{}, fmt.Errorf("%v: %s", err, errOut)
	}
	var s jobStatus
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		return s, fmt.Errorf("status --json: %v: %q", err, out)
	}
	return s, nil
}

// submit submits a job with flags and returns its ID.
func (c *cluster) submit(args ...string) string {
	c.t.Helper()
	out := c.mustClient(append([]string{"submit"}, args...)...)
	id := strings.TrimSpace(out)
	if id == "" || strings.Contains(id, "\n") {
		c.t.Fatalf("submit printed %q, want the job ID", out)
	}
	return id
}

// waitJob waits until job id is finished and returns its status.
func (c *cluster) waitJob(id string, timeout time.Duration) jobStatus {
	c.t.Helper()
	var s jobStatus
	eventually(c.t, timeout, "job "+id+" to finish", func() error {
		var err error
		if s, err = c.status(id); err != nil {
			return err
		}
		if !s.terminal() {
			return fmt.Errorf("job %s is %s at iteration %d", id, s.State, s.Iteration)
		}
		return nil
	})
	return s
}

// waitIteration waits until job id is running at iteration it or later, and fails if it
// finished first.
func (c *cluster) waitIteration(id string, it int, timeout time.Duration) jobStatus {
	c.t.Helper()
	var s jobStatus
	eventually(c.t, timeout, fmt.Sprintf("job %s at iteration %d", id, it), func() error {
		var err error
		if s, err = c.status(id); err != nil {
			return err
		}
		if s.terminal() {
			c.t.Fatalf("job %s finished (%s) before iteration %d could be observed running: make the job longer", id, s.State, it)
		}
		if s.State != "running" || s.Iteration < it {
			return fmt.Errorf("job %s is %s at iteration %d", id, s.State, s.Iteration)
		}
		return nil
	})
	return s
}

// model fetches a finished job's model bytes through the client.
func (c *cluster) model(id string) []byte {
	c.t.Helper()
	p := filepath.Join(c.dir, id+".gpm")
	c.mustClient("model", id, "--out", p)
	b, err := os.ReadFile(p)
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

// cleanup stops every process; when the test failed it logs the end of each log.
func (c *cluster) cleanup() {
	var wg sync.WaitGroup
	for _, p := range c.all {
		wg.Go(p.kill)
	}
	wg.Wait()
	if !c.t.Failed() {
		return
	}
	for _, p := range c.all {
		c.t.Logf("--- last lines of %s (%s):\n%s", p.name, p.logPath, tail(p.log(), 40))
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	return testutil.FreeAddr(t)
}

// eventually polls cond until it returns nil or waitSlack times timeout
// passes.
// waitSlack stretches every wait: a deadline here only bounds how long a failing test
// hangs, it measures nothing, and a loaded 2-core machine can be many times slower than the
// one a timeout was chosen on. Tests that assert a bound on time measure it themselves.
const waitSlack = 6

func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	timeout *= waitSlack
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s: %v", timeout, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// localModel trains with `coordinator eval` (the in-process engine) and returns the model's
// bytes.
func localModel(t *testing.T, args ...string) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "local.gpm")
	cmd := exec.Command(bins.coordinator, append([]string{"eval", "--json", "--model-out", p}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("coordinator eval: %v\n%s", err, out)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
