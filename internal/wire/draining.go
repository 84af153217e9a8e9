package wire

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// DrainingStatus is a stopping worker's answer to a new task: UNAVAILABLE with a
// pb.WorkerDraining detail. The worker finishes the tasks it runs; the coordinator moves its
// other shards elsewhere without cancelling those (DrainingOf).
func DrainingStatus() error {
	st := status.New(codes.Unavailable, "run task: the worker is stopping and takes no new tasks; run it on another worker")
	if d, err := st.WithDetails(&pb.WorkerDraining{}); err == nil {
		st = d
	}
	return st.Err()
}

// DrainingOf reports whether err (possibly wrapped) is a worker's DrainingStatus: an
// UNAVAILABLE status with a pb.WorkerDraining detail.
func DrainingOf(err error) bool {
	st, ok := statusOf(err, codes.Unavailable)
	if !ok {
		return false
	}
	for _, d := range st.Details() {
		if _, ok := d.(*pb.WorkerDraining); ok {
			return true
		}
	}
	return false
}
