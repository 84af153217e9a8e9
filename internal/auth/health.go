package auth

import (
	"strings"

	"google.golang.org/grpc/health/grpc_health_v1"
)

// OpenHealth returns p with the standard gRPC health service exempted: its calls need no
// token, so that probes (Kubernetes' grpc probe, grpc_health_probe, load balancers) can ask
// whether a server is serving. The health service reveals only serving states.
func OpenHealth(p Policy) Policy {
	return func(method string) []string {
		if svc, _, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/"); ok && svc == grpc_health_v1.Health_ServiceDesc.ServiceName {
			return nil
		}
		if p == nil {
			return nil
		}
		return p(method)
	}
}
