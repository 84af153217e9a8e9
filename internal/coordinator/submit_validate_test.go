package coordinator

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestSubmitJobValidatesTheSpec: SubmitJob refuses a bad spec with InvalidArgument naming
// the field (unknown method, a setting of another method, insane bounds, no data) before
// the job is stored, so no job appears; a good spec is stored with its settings under the
// method's case.
func TestSubmitJobValidatesTheSpec(t *testing.T) {
	s := startSingle(t, nil)
	c := dial(t, s.APIAddr(), "")
	ctx := testContext(t)
	data := &pb.DataSource{Uri: "/nonexistent/d.csv"}
	for _, tc := range []struct {
		name string
		js   *pb.JobSpec
		want string
	}{
		{"unknown method", &pb.JobSpec{Method: "svgp", Data: data}, "spec.method: unknown method \"svgp\""},
		{"setting of another method", &pb.JobSpec{Method: "gl", Settings: &pb.JobSpec_Cg{Cg: &pb.CGSettings{CgIters: 50}}, Data: data},
			"spec.cg_iters: a setting of cg and kmcg; drop it for method gl"},
		{"flat setting of another method", &pb.JobSpec{Method: "exact", Probes: 4, Data: data}, "spec.probes: a setting of cg; drop it for method exact"},
		{"inverted bounds", &pb.JobSpec{Method: "exact", NoiseVarianceBounds: []float64{1, 0.1}, Data: data}, "spec.noise_variance_bounds: lower bound"},
		{"bad setting", &pb.JobSpec{Method: "cg", Settings: &pb.JobSpec_Cg{Cg: &pb.CGSettings{Truncation: "geometric"}}, Data: data}, "spec.truncation: unknown truncation"},
		{"no data", &pb.JobSpec{Method: "exact"}, "spec.data.uri: empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: tc.js, Id: "bad"})
			if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), tc.want) {
				t.Fatalf("err %v, want InvalidArgument starting %q", err, tc.want)
			}
		})
	}
	list, err := c.ListJobs(ctx, &pb.ListJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.GetJobs()); n != 0 {
		t.Fatalf("%d jobs stored after refused submissions", n)
	}
	job, err := c.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: &pb.JobSpec{Method: "kmcg", Settings: &pb.JobSpec_Kmcg{Kmcg: &pb.KMCGSettings{Subset: 20}}, Data: data}, Id: "good"})
	if err != nil {
		t.Fatal(err)
	}
	if got := job.GetSpec().GetKmcg().GetSubset(); got != 20 {
		t.Errorf("stored spec %v: kmcg.subset %d, want 20", job.GetSpec(), got)
	}
}
