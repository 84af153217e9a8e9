package coordinator

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/gpreduce/gpreduce/internal/wire"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestRegisterWorkerAtOwnAddress: RegisterWorker records a worker at the IP address it calls
// from (here 127.0.0.1) with its advertised port, whatever host it claims, unless the claimed
// host is that IP or resolves to it; and every registration hands out a new session in the
// answer's header, the one the leader's tasks to that worker then carry.
func TestRegisterWorkerAtOwnAddress(t *testing.T) {
	s := startSingle(t, func(c *ServerConfig) { c.JoinToken = "join" })
	c := dial(t, s.APIAddr(), "join")
	ctx := testContext(t)
	sessions := map[string]bool{}
	for _, tc := range []struct {
		name, advertised, want string
	}{
		{"another host's IP", "10.9.8.7:7200", "127.0.0.1:7200"},
		{"its own IP", "127.0.0.1:7201", "127.0.0.1:7201"},
		{"a name resolving to its IP", "localhost:7202", "localhost:7202"},
		{"a name resolving elsewhere", "invalid.example.invalid:7203", "127.0.0.1:7203"},
	} {
		var header metadata.MD
		resp, err := c.RegisterWorker(ctx, &pb.RegisterWorkerRequest{Address: tc.advertised, Name: tc.name}, grpc.Header(&header))
		if err != nil {
			t.Fatalf("%s: RegisterWorker: %v", tc.name, err)
		}
		var got string
		var session string
		for _, w := range s.pool.Live() {
			if w.ID == resp.GetWorkerId() {
				got, session = w.Addr, string(w.Session)
			}
		}
		if got != tc.want {
			t.Errorf("%s: advertised %s, registered at %q, want %q", tc.name, tc.advertised, got, tc.want)
		}
		if v := header.Get(wire.SessionKey); len(v) != 1 || v[0] != session || session == "" || sessions[session] {
			t.Errorf("%s: session header %q, registry session %q (new sessions each time: %v)", tc.name, v, session, sessions)
		}
		sessions[session] = true
	}
}
