// Command worker is a gpreduce worker: `worker serve --join ADDR` registers with the
// coordinators, loads shards and runs map tasks until interrupted.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gpreduce/gpreduce/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.ExecuteWorker(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
