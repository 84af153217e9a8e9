package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpreduce/gpreduce/internal/coordinator/store"
	pb "github.com/gpreduce/gpreduce/proto/gpreduce/v1"
)

// The jobs resource: submit, get, list, cancel and delete jobs.

// validJobID reports whether a client-chosen job ID is 1 to 128 letters, digits, '.', '_'
// or '-', starting with a letter or digit.
func validJobID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i, c := range id {
		alnum := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != '-')) {
			return false
		}
	}
	return true
}

// SubmitJob validates the spec, stores the job and starts it.
func (s *Server) SubmitJob(ctx context.Context, req *pb.SubmitJobRequest) (*pb.Job, error) {
	if err := s.requireLeader(ctx); err != nil {
		return nil, err
	}
	plan, err := planFromSpec(req.GetSpec())
	if err != nil {
		return nil, err
	}
	id := req.GetId()
	if id == "" {
		id = newJobID()
	} else if !validJobID(id) {
		return nil, status.Errorf(codes.InvalidArgument,
			"id: %q is not a valid job ID: use 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	spec, err := encodeSpec(specFromPlan(plan))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := s.state.SubmitJob(ctx, id, spec, time.Time{}); err != nil {
		return nil, s.unaryStatus(ctx, err)
	}
	s.runner.start(id)
	s.log.Info().Str("job", id).Str("method", plan.Spec.Method).Str("data", plan.Source.URI).Msg("job submitted")
	return s.jobMessage(id)
}

// newJobID returns a random job ID.
func newJobID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "job-" + hex.EncodeToString(b)
}

func (s *Server) jobMessage(id string) (*pb.Job, error) {
	j, err := s.state.JobView(id)
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	out := jobProto(j)
	// The status names the slow workers: the replicated straggler events become warnings.
	if evs, _, err := s.state.Events(id, 0); err == nil {
		for _, ev := range evs {
			if ev.Phase == stragglerPhase {
				out.Warnings = append(out.Warnings, &pb.Warning{Code: stragglerPhase, Message: ev.Message})
			}
		}
	}
	return out, nil
}

// jobProto is the API form of j.
func jobProto(j store.Job) *pb.Job {
	out := &pb.Job{
		Id: j.ID, State: j.State.Proto(), Error: j.Error,
		CreatedUnixNano: j.CreatedAt.UnixNano(), UpdatedUnixNano: j.UpdatedAt.UnixNano(),
		Iteration: int32(j.Iteration), Objective: j.Objective, ModelBytes: j.ModelSize,
	}
	if js, err := decodeSpec(j.Spec); err == nil {
		out.Spec = js
	}
	if len(j.Metrics) > 0 {
		if m, err := decodeMetrics(j.Metrics); err == nil {
			if m.GetModelBytes() == 0 { // recorded before the metrics held it
				m.ModelBytes = j.ModelSize
			}
			out.Metrics = m
			// The fields of the metrics that Job repeats for older clients.
			out.Hyperparameters, out.NTrain, out.LogLikelihood = m.GetHyperparameters(), m.GetNTrain(), m.GetLogLikelihood()
			out.TrainSeconds, out.Iteration, out.MethodChoice = m.GetTrainSeconds(), m.GetIterations(), m.GetMethodChoice()
			out.Warnings = append(out.Warnings, m.GetWarnings()...)
		}
	}
	return out
}

// GetJob returns a job from this member's state, once it reflects every change committed
// before the call (see readBarrier).
func (s *Server) GetJob(ctx context.Context, req *pb.GetJobRequest) (*pb.Job, error) {
	if err := s.readBarrier(ctx, unaryTrailer(ctx)); err != nil {
		return nil, err
	}
	return s.jobMessage(req.GetId())
}

// ListJobs lists the jobs in this member's state, oldest first, once it reflects every
// change committed before the call.
func (s *Server) ListJobs(ctx context.Context, _ *pb.ListJobsRequest) (*pb.ListJobsResponse, error) {
	if err := s.readBarrier(ctx, unaryTrailer(ctx)); err != nil {
		return nil, err
	}
	views := s.state.JobViews()
	out := &pb.ListJobsResponse{Jobs: make([]*pb.Job, len(views))}
	for i, j := range views {
		out.Jobs[i] = jobProto(j)
	}
	return out, nil
}

// CancelJob cancels a pending or running job and stops its run.
func (s *Server) CancelJob(ctx context.Context, req *pb.CancelJobRequest) (*pb.Job, error) {
	if err := s.requireLeader(ctx); err != nil {
		return nil, err
	}
	id := req.GetId()
	if err := s.state.CancelJob(ctx, id, time.Time{}); err != nil {
		if errors.Is(err, store.ErrInvalidTransition) {
			if j, jerr := s.state.JobView(id); jerr == nil {
				return nil, status.Errorf(codes.FailedPrecondition, "job %s already %s: only pending or running jobs can be canceled", id, j.State)
			}
		}
		return nil, s.unaryStatus(ctx, err)
	}
	s.runner.cancel(id)
	s.log.Info().Str("job", id).Msg("job canceled")
	return s.jobMessage(id)
}

// DeleteJob removes finished jobs with their models, checkpoints and events from every
// member.
func (s *Server) DeleteJob(ctx context.Context, req *pb.DeleteJobRequest) (*pb.DeleteJobResponse, error) {
	if err := s.requireLeader(ctx); err != nil {
		return nil, err
	}
	ids := req.GetIds()
	if len(ids) == 0 {
		return nil, status.Error(codes.InvalidArgument, "ids: empty; give the IDs of the finished jobs to delete")
	}
	if err := s.state.DeleteJobs(ctx, ids, time.Time{}); err != nil {
		if errors.Is(err, store.ErrJobActive) {
			return nil, status.Errorf(codes.FailedPrecondition, "%v (coordinator cancel ID, then delete)", err)
		}
		return nil, s.unaryStatus(ctx, err)
	}
	s.log.Info().Strs("jobs", ids).Msg("jobs deleted")
	return &pb.DeleteJobResponse{}, nil
}
