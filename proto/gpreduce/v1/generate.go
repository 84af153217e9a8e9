// Package gpreducev1 holds the gRPC API of gpreduce: the Coordinator service (jobs, models,
// worker registration) and the Worker service (shards and map steps), with the messages that
// carry tasks and their reduced statistics. The *.pb.go files are generated and committed;
// `go generate ./proto/...` regenerates them (scripts/install-protoc.sh installs the tools).
package gpreducev1

//go:generate sh -c "cd ../.. && protoc --go_out=paths=source_relative:. --go-grpc_out=paths=source_relative:. gpreduce/v1/types.proto gpreduce/v1/worker.proto gpreduce/v1/coordinator.proto"
