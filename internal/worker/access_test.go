package worker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/shard"
	"github.com/gpreduce/gpreduce/internal/tasks"
	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestTasksConfined: a worker confined to a data root refuses the rows task (which returns
// raw rows) and every other task on files outside the root and on URLs not allowed, or of
// a loopback service, without echoing them; it serves a file under the root.
func TestTasksConfined(t *testing.T) {
	const secret = "7f3a9e1"
	root := t.TempDir()
	good := writeData(t, root, 20)
	outside := filepath.Join(t.TempDir(), "numbers.csv")
	if err := os.WriteFile(outside, []byte("x,y\n"+secret+",1\n2,3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("x,y\n" + secret + ",1\n"))
	}))
	defer srv.Close()
	acc, err := shard.NewAccess([]string{root}, []string{srv.URL + "/"}, false)
	if err != nil {
		t.Fatal(err)
	}
	w := startWorker(t, Config{Cores: 1, JoinToken: "tok", Data: shard.Reader{Access: acc}, UnregisteredTasks: true})
	c := workerClient(t, w.Addr(), "tok")
	tf := shard.Transform{XMean: []float64{0}, XScale: []float64{1}, YScale: 1}
	rows, err := wire.EncodeTask(&tasks.RowsTask{Transform: tf})
	if err != nil {
		t.Fatal(err)
	}
	moments, _ := wire.EncodeTask(shard.MomentsTask{})
	ctx := context.Background()
	for _, tc := range []struct {
		name, uri string
		task      *pb.Task
		want      string
	}{
		{"rows of a file outside", outside, rows, "outside the data roots"},
		{"moments of a file outside", outside, moments, "outside the data roots"},
		{"rows of /etc/passwd", "/etc/passwd", rows, "outside the data roots"},
		{"rows of a URL not allowed", "http://203.0.113.9/x.csv", rows, "matches no allowed prefix"},
		{"rows of a loopback service", srv.URL + "/x.csv", rows, "loopback"},
	} {
		_, err := c.RunTask(ctx, &pb.RunTaskRequest{Source: &pb.DataSource{Uri: tc.uri, Header: true},
			Shard: &pb.ShardRef{Length: 10}, Task: tc.task})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want FailedPrecondition mentioning %q", tc.name, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "root:")) {
			t.Errorf("%s: the error echoes the source: %v", tc.name, err)
		}
	}
	if _, err := c.RunTask(ctx, &pb.RunTaskRequest{Source: &pb.DataSource{Uri: good, Header: true},
		Shard: &pb.ShardRef{}, Task: rows}); err != nil {
		t.Errorf("rows of a file under the root: %v", err)
	}
}
