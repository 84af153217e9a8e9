// Command coordinator trains Gaussian-process regression models: `demo` runs the embedded
// default, `eval` trains and scores a method on held-out data, `predict` applies a model.
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
	code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
