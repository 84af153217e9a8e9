package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpreduce/gpreduce/internal/testutil"
)

// TestSubmitTrainRowsEqualsEval: a cluster job submitted with --train-rows (served by an
// in-process coordinator and worker) trains the model eval --train-rows trains on the same
// file and shards, byte for byte.
func TestSubmitTrainRowsEqualsEval(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator and a worker")
	}
	dir := t.TempDir()
	tr := writeCSV(t, dir, "train.csv", 400, 0)
	tokenFile, joinFile := filepath.Join(dir, "token"), filepath.Join(dir, "join")
	for _, f := range []struct{ path, v string }{{tokenFile, testToken}, {joinFile, "join-token-0123456789"}} {
		if err := os.WriteFile(f.path, []byte(f.v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	api, _, _, _ := serveNode(t, dir, "--token-file", tokenFile, "--join-token-file", joinFile, "--bootstrap", "--data-root", dir,
		"--raft-heartbeat-timeout", "200ms", "--raft-election-timeout", "200ms")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var wOut, wErr lockedBuffer
	go func() {
		done <- ExecuteWorker(ctx, []string{"serve", "--join", api, "--listen", "127.0.0.1:0", "--join-token-file", joinFile,
			"--data-root", dir, "--log-level", "warn"}, &wOut, &wErr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(testutil.MinWait): // only bounds a hang
			t.Error("the worker did not stop")
		}
	})
	job := []string{"--method", "exact", "--header", "--train-rows", "150", "--shards", "3", "--max-iter", "8"}
	local := filepath.Join(dir, "local.gpm")
	if code, _, errOut := run(t, append([]string{"eval", "--train", tr, "--test", tr, "--model-out", local}, job...)...); code != 0 {
		t.Fatalf("eval: exit %d: %s", code, errOut)
	}
	conn := []string{"--addr", api, "--token", testToken, "--leader-wait", "3m"}
	code, out, errOut := run(t, append(append([]string{"submit", "--data", tr, "--id", "sampled", "--wait"}, job...), conn...)...)
	if code != 0 {
		t.Fatalf("submit: exit %d: %s\n%s\nworker: %s", code, out, errOut, wErr.String())
	}
	if !strings.Contains(out, "150 rows") || !strings.Contains(out, "a fixed sample of 150 rows") {
		t.Errorf("the job did not train on 150 rows:\n%s", out)
	}
	cluster := filepath.Join(dir, "cluster.gpm")
	if code, _, errOut := run(t, append([]string{"model", "get", "sampled", "--out", cluster}, conn...)...); code != 0 {
		t.Fatalf("model get: exit %d: %s", code, errOut)
	}
	legacy := filepath.Join(dir, "legacy.gpm")
	if code, _, errOut := run(t, append([]string{"model", "sampled", "--out", legacy}, conn...)...); code != 0 {
		t.Fatalf("model ID --out: exit %d: %s", code, errOut)
	}
	code, shown, errOut := run(t, append([]string{"model", "show", "sampled", "-o", "json"}, conn...)...)
	var d modelDescription
	if err := json.Unmarshal([]byte(shown), &d); code != 0 || err != nil || d.NTrain != 150 || d.Source != "job sampled" {
		t.Errorf("model show of the job: exit %d, %v: %+v %s", code, err, d, errOut)
	}
	a, _ := os.ReadFile(local)
	if c, _ := os.ReadFile(legacy); !bytes.Equal(a, c) {
		t.Error("model ID --out wrote another model than model get")
	}
	b, _ := os.ReadFile(cluster)
	if len(a) == 0 || !bytes.Equal(a, b) {
		_, da, _ := run(t, "model", "show", local)
		_, db, _ := run(t, "model", "show", cluster)
		t.Errorf("the cluster's model (%d bytes) differs from eval's (%d bytes):\neval:\n%s\ncluster:\n%s", len(b), len(a), da, db)
	}
}
