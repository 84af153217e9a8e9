package coordinator

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpreduce/gpreduce/internal/shard"
)

// TestPlanDataBounded: planning a source that never answers gives up after the plan
// timeout with an error saying so; a source outside the runner's access policy is refused
// before anything is read; a readable source is planned with its column names.
func TestPlanDataBounded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("/silent.csv", func(w http.ResponseWriter, r *http.Request) { <-ctx.Done() })
	mux.HandleFunc("/ok.csv", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "ok.csv", time.Time{}, strings.NewReader("a,b,y\n1,2,3\n4,5,6\n"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer cancel()

	r := &runner{planTimeout: 300 * time.Millisecond}
	t0 := time.Now()
	_, err := r.planData(context.Background(), shard.Source{URI: srv.URL + "/silent.csv", Header: true}, 2)
	if err == nil || !strings.Contains(err.Error(), "gave up after 300ms") {
		t.Errorf("silent source: %v", err)
	}
	if took := time.Since(t0); took > 10*time.Second {
		t.Errorf("gave up after %s", took)
	}
	l, err := r.planData(context.Background(), shard.Source{URI: srv.URL + "/ok.csv", Header: true, Target: "y"}, 2)
	if err != nil || len(l.Refs) != 2 || strings.Join(l.Columns, ",") != "a,b" || l.Target != "y" {
		t.Errorf("readable source: %+v, %v", l, err)
	}

	acc, err := shard.NewAccess([]string{t.TempDir()}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	r.data = shard.Reader{Access: acc}
	for _, uri := range []string{"/etc/passwd", srv.URL + "/ok.csv"} {
		if _, err := r.planData(context.Background(), shard.Source{URI: uri, Header: true}, 2); !errors.Is(err, shard.ErrRefused) {
			t.Errorf("%s: %v, want a refusal", uri, err)
		}
	}
}
