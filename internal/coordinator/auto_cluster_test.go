package coordinator

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpreduce/gpreduce/internal/model"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// TestServerTrainsAuto: a job submitted with method auto runs on remote workers, gives the
// local engine's model bytes, and its status carries the chosen method, the reason and the
// model's warnings; the spec keeps "auto".
func TestServerTrainsAuto(t *testing.T) {
	s := startSingle(t, nil)
	startWorkers(t, 2, []string{s.APIAddr()}, "")
	waitWorkers(t, s.Server, 2)
	c := dial(t, s.APIAddr(), "")
	path := writeCSV(t, t.TempDir(), "train.csv", 300, 3)
	for _, tc := range []struct {
		id, want string
		js       *pb.JobSpec
	}{
		// gl over a 625-feature budget: the grid is sized down and the model warns.
		{"gl-sized", "gl", &pb.JobSpec{Method: "gl", MaxIter: 20, Shards: 3, MaxFeatures: 625, Data: &pb.DataSource{Uri: path, Header: true, Target: "y"}}},
		{"auto-exact", "exact", &pb.JobSpec{Method: "auto", MaxIter: 20, Shards: 3, Data: &pb.DataSource{Uri: path, Header: true, Target: "y"}}},
		{"auto-cg", "cg", &pb.JobSpec{Method: "auto", MaxIter: 20, Shards: 3, ExactMaxRows: 100,
			Data: &pb.DataSource{Uri: path, Header: true, Target: "y"}}},
		{"auto-grief", "grief", &pb.JobSpec{Method: "auto", MaxIter: 20, Shards: 3,
			Settings: &pb.JobSpec_Auto{Auto: &pb.AutoSettings{ExactMaxRows: 100, CgMaxRows: 100}},
			Data:     &pb.DataSource{Uri: path, Header: true, Target: "y"}}},
	} {
		want := localModel(t, tc.js)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		if _, err := c.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: tc.js, Id: tc.id}); err != nil {
			t.Fatal(err)
		}
		j := waitState(t, c, tc.id, pb.JobState_JOB_STATE_SUCCEEDED, 5*time.Minute)
		got, err := s.node.Model(tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the cluster's model (%d bytes) differs from the local engine's (%d bytes)", tc.id, len(got), len(want))
		}
		m, err := model.Decode(bytes.NewReader(got))
		if err != nil {
			t.Fatal(err)
		}
		if len(j.GetWarnings()) != len(m.Warnings) {
			t.Fatalf("%s: status warnings %v, model warnings %v", tc.id, j.GetWarnings(), m.Warnings)
		}
		for i, w := range j.GetWarnings() {
			if w.GetCode() != m.Warnings[i].Code || w.GetMessage() != m.Warnings[i].Message {
				t.Errorf("%s: status warning %v, model's %v", tc.id, w, m.Warnings[i])
			}
		}
		ch := j.GetMethodChoice()
		if tc.js.Method != "auto" {
			if ch != nil || !m.HasWarning(model.WarnSizing) || j.GetWarnings()[0].GetCode() != model.WarnSizing {
				t.Errorf("%s: choice %v, warnings %v; want no choice and the sizing warning", tc.id, ch, j.GetWarnings())
			}
			continue
		}
		if j.GetSpec().GetMethod() != "auto" || ch.GetMethod() != tc.want || m.Method != tc.want || !strings.Contains(ch.GetReason(), "exact-max-rows") {
			t.Errorf("%s: spec method %q, choice %v, model method %q", tc.id, j.GetSpec().GetMethod(), ch, m.Method)
		}
		// The kernel: exact and cg choose it by the evidence (the spec keeps "auto"), the
		// other methods take rbf; the status carries the model's kernel and reason.
		jm := j.GetMetrics()
		chooses := tc.want == "exact" || tc.want == "cg"
		if jm.GetKernel() != m.Kernel || jm.GetKernelReason() != m.KernelReason || j.GetSpec().GetKernel() != "auto" ||
			chooses != (m.KernelReason != "") || (!chooses && m.Kernel != "rbf") {
			t.Errorf("%s: spec kernel %q, status kernel %q (%q), model kernel %q (%q)", tc.id, j.GetSpec().GetKernel(), jm.GetKernel(), jm.GetKernelReason(), m.Kernel, m.KernelReason)
		}
	}
}
