package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/gpreduce/gpreduce/internal/train"
)

// progress shows training events: a redrawn bar on a terminal, one line per event otherwise
// (optimizer iterations every tenth, to keep logs short).
type progress struct {
	mu   sync.Mutex
	w    io.Writer
	tty  bool
	open bool // a bar is drawn on the current line
}

func newProgress(w io.Writer, tty bool) *progress { return &progress{w: w, tty: tty} }

func (p *progress) observe(ev train.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ev.Phase != "optimize" {
		p.endBar()
		fmt.Fprintf(p.w, "%-9s %s\n", ev.Phase, ev.Message)
		return
	}
	if !p.tty {
		if ev.Iteration%10 == 0 || ev.Iteration == 1 {
			fmt.Fprintf(p.w, "optimize  iteration %d/%d  -log p(y)/n = %.6f\n", ev.Iteration, ev.MaxIter, ev.Objective)
		}
		return
	}
	const width = 30
	done := width
	if ev.MaxIter > 0 {
		done = min(width, width*ev.Iteration/ev.MaxIter)
	}
	fmt.Fprintf(p.w, "\roptimize  [%s%s] %3d/%d  -log p(y)/n = %.6f", strings.Repeat("#", done), strings.Repeat(".", width-done), ev.Iteration, ev.MaxIter, ev.Objective)
	p.open = true
}

// done ends any bar line.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endBar()
}

func (p *progress) endBar() {
	if p.open {
		fmt.Fprintln(p.w)
		p.open = false
	}
}
