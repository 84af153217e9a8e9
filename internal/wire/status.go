package wire

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// statusOf returns the gRPC status err (possibly wrapped) carries when its code is code.
func statusOf(err error, code codes.Code) (*status.Status, bool) {
	var se interface{ GRPCStatus() *status.Status }
	if err == nil || !errors.As(err, &se) {
		return nil, false
	}
	st := se.GRPCStatus()
	return st, st.Code() == code
}
